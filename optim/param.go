package optim

import (
	"fmt"
	"math"

	"github.com/pkg/errors"
	"gorgonia.org/tensor"
)

// Param is one learnable tensor: its value and its gradient, updated in place.
// Value and Grad must have the same shape and the same dtype, tensor.Float32 or
// tensor.Float64, and must be contiguous (not a transposed or strided view):
// optimisers write through the backing slice returned by Data.
//
// Name identifies the optimiser state (moments, momentum buffer) of the
// parameter across steps and in checkpoints; it must be non-empty and unique in
// the slice passed to Optimizer.Step.
type Param struct {
	Name  string
	Value tensor.Tensor
	Grad  tensor.Tensor
	// NoDecay excludes the parameter from weight decay (biases, LayerNorm
	// gains, position-encoding tables).
	NoDecay bool
}

// ZeroGrad sets every gradient of ps to zero. Params with a nil Grad are
// skipped.
//
// ZeroGrad panics if a Grad is not a contiguous Float32 or Float64 tensor.
func ZeroGrad(ps []Param) {
	for i := range ps {
		if ps[i].Grad == nil {
			continue
		}
		d, err := floats(ps[i].Grad)
		if err != nil {
			panic(fmt.Sprintf("optim: ZeroGrad: param %q: grad: %v", ps[i].Name, err))
		}
		zero(d)
	}
}

// GradNorm returns the L2 norm of all gradients of ps taken together,
//
//	sqrt(Σ_params Σ_i g_i²),
//
// accumulated in float64. Params with a nil Grad are skipped.
//
// GradNorm panics if a Grad is not a contiguous Float32 or Float64 tensor.
func GradNorm(ps []Param) float64 {
	return math.Sqrt(sumSquares("GradNorm", ps))
}

// clipEps is the constant PyTorch adds to the norm in clip_grad_norm_.
const clipEps = 1e-6

// ClipGradNorm rescales the gradients of ps so that their total L2 norm is at
// most maxNorm, with the semantics of PyTorch's torch.nn.utils.clip_grad_norm_
// (Pascanu et al. 2013): with total = GradNorm(ps),
//
//	coef = maxNorm / (total + 1e-6)
//	if coef < 1: g ← coef·g for every gradient,
//
// so gradients are left untouched when total+1e-6 <= maxNorm and otherwise
// scaled to a norm just below maxNorm; the direction of the overall gradient is
// preserved (unlike Gorgonia's WithClip, which clamps each element). It
// returns total, the norm before clipping. If total is NaN or ±Inf the
// gradients are not modified and total is returned as is, so the caller can
// detect the divergence and stop (PyTorch would multiply every gradient by
// NaN). Params with a nil Grad are skipped.
//
// ClipGradNorm panics if maxNorm is negative or NaN, or if a Grad is not a
// contiguous Float32 or Float64 tensor.
func ClipGradNorm(ps []Param, maxNorm float64) float64 {
	if !(maxNorm >= 0) {
		panic(fmt.Sprintf("optim: ClipGradNorm: maxNorm %v: must be >= 0", maxNorm))
	}
	total := math.Sqrt(sumSquares("ClipGradNorm", ps))
	if math.IsNaN(total) || math.IsInf(total, 0) {
		return total
	}
	coef := maxNorm / (total + clipEps)
	if coef >= 1 {
		return total
	}
	for i := range ps {
		if ps[i].Grad == nil {
			continue
		}
		d, _ := floats(ps[i].Grad) // checked by sumSquares
		switch g := d.(type) {
		case []float32:
			scale(g, coef)
		case []float64:
			scale(g, coef)
		}
	}
	return total
}

func sumSquares(fn string, ps []Param) float64 {
	var s float64
	for i := range ps {
		if ps[i].Grad == nil {
			continue
		}
		d, err := floats(ps[i].Grad)
		if err != nil {
			panic(fmt.Sprintf("optim: %s: param %q: grad: %v", fn, ps[i].Name, err))
		}
		switch g := d.(type) {
		case []float32:
			for _, x := range g {
				s += float64(x) * float64(x)
			}
		case []float64:
			for _, x := range g {
				s += x * x
			}
		}
	}
	return s
}

func scale[T float32 | float64](g []T, c float64) {
	for i, x := range g {
		g[i] = T(float64(x) * c)
	}
}

func zero(d any) {
	switch g := d.(type) {
	case []float32:
		clear(g)
	case []float64:
		clear(g)
	}
}

// floats returns the backing slice of t, a []float32 or a []float64 of
// length t.Shape().TotalSize(), or an error saying why t cannot be updated in
// place through it.
func floats(t tensor.Tensor) (any, error) {
	if t == nil {
		return nil, errors.New("nil tensor")
	}
	if t.RequiresIterator() {
		return nil, errors.Errorf("non-contiguous tensor of shape %v (a transposed, strided or masked view)", t.Shape())
	}
	n := t.Shape().TotalSize()
	var d any
	switch t.Dtype() {
	case tensor.Float32:
		if u, ok := t.(interface{ Float32s() []float32 }); ok {
			d = u.Float32s() // also for 0-d tensors, whose Data is not a slice
		} else {
			d = t.Data()
		}
		s, ok := d.([]float32)
		if !ok || len(s) != n {
			return nil, errors.Errorf("Float32 tensor of shape %v: backing data is not a []float32 of length %d", t.Shape(), n)
		}
		return s, nil
	case tensor.Float64:
		if u, ok := t.(interface{ Float64s() []float64 }); ok {
			d = u.Float64s()
		} else {
			d = t.Data()
		}
		s, ok := d.([]float64)
		if !ok || len(s) != n {
			return nil, errors.Errorf("Float64 tensor of shape %v: backing data is not a []float64 of length %d", t.Shape(), n)
		}
		return s, nil
	}
	return nil, errors.Errorf("dtype %v: want Float32 or Float64", t.Dtype())
}

// param is a checked Param: p and g are both []float32 or both []float64 of
// length n.
type param struct {
	name    string
	p, g    any
	n       int
	noDecay bool
}

// check validates ps for fn (e.g. "AdamW.Step") and returns their slices.
func check(fn string, ps []Param) ([]param, error) {
	out := make([]param, len(ps))
	seen := make(map[string]bool, len(ps))
	for i, q := range ps {
		if q.Name == "" {
			return nil, errors.Errorf("optim: %s: param %d has an empty name", fn, i)
		}
		if seen[q.Name] {
			return nil, errors.Errorf("optim: %s: param %q: duplicated name", fn, q.Name)
		}
		seen[q.Name] = true
		if q.Value == nil {
			return nil, errors.Errorf("optim: %s: param %q: nil Value", fn, q.Name)
		}
		if q.Grad == nil {
			return nil, errors.Errorf("optim: %s: param %q: nil Grad", fn, q.Name)
		}
		if q.Value.Dtype() != q.Grad.Dtype() {
			return nil, errors.Errorf("optim: %s: param %q: Value dtype %v != Grad dtype %v", fn, q.Name, q.Value.Dtype(), q.Grad.Dtype())
		}
		if !q.Value.Shape().Eq(q.Grad.Shape()) {
			return nil, errors.Errorf("optim: %s: param %q: Value shape %v != Grad shape %v", fn, q.Name, q.Value.Shape(), q.Grad.Shape())
		}
		p, err := floats(q.Value)
		if err != nil {
			return nil, errors.Errorf("optim: %s: param %q: Value: %v", fn, q.Name, err)
		}
		g, err := floats(q.Grad)
		if err != nil {
			return nil, errors.Errorf("optim: %s: param %q: Grad: %v", fn, q.Name, err)
		}
		out[i] = param{name: q.Name, p: p, g: g, n: q.Value.Shape().TotalSize(), noDecay: q.NoDecay}
	}
	return out, nil
}

// checkLoaded reports an error if the names of ps differ from the names in
// loaded (the parameters whose state was restored by LoadState).
func checkLoaded(fn string, ps []param, loaded map[string]bool) error {
	if loaded == nil {
		return nil
	}
	in := make(map[string]bool, len(ps))
	for _, q := range ps {
		in[q.name] = true
		if !loaded[q.name] {
			return errors.Errorf("optim: %s: param %q has no entry in the state given to LoadState", fn, q.name)
		}
	}
	for name := range loaded {
		if !in[name] {
			return errors.Errorf("optim: %s: the state given to LoadState holds param %q, which is not among the %d params", fn, name, len(ps))
		}
	}
	return nil
}

// checkHyper returns an error unless x is finite and lo <= x < hi (hi
// excluded only if open).
func checkHyper(fn, name string, x, lo, hi float64, open bool) error {
	ok := !math.IsNaN(x) && !math.IsInf(x, 0) && x >= lo && (x < hi || (!open && x == hi))
	if ok {
		return nil
	}
	bracket := "]"
	if open {
		bracket = ")"
	}
	return errors.Errorf("optim: %s: %s = %v: want a value in [%v, %v%s", fn, name, x, lo, hi, bracket)
}

func copyOf(x []float64) []float64 { return append([]float64(nil), x...) }
