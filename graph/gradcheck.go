package graph

import (
	"fmt"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// GradCheckOpts configures GradCheck. Zero fields take their defaults.
type GradCheckOpts struct {
	Eps        float64 // finite-difference step, default 1e-6
	ATol, RTol float64 // pass if |analytic-numeric| <= ATol + RTol*max(|a|,|n|); defaults 1e-6, 1e-4
	MaxPerNode int     // check at most this many elements per node, chosen by a seeded RNG (0 = all)
	Seed       int64
}

// maxReported is how many disagreements a GradCheck error details.
const maxReported = 5

// GradCheck checks Gorgonia's symbolic gradient of the scalar loss with
// respect to each node of wrt against central finite differences.
//
// The nodes of wrt are input nodes (learnables, or inputs with values bound)
// of g, a float64 graph. GradCheck adds the gradient nodes to g with G.Grad,
// runs a TapeMachine with G.BindDualValues(wrt...) once and reads each node's
// gradient. Gradients left in the nodes' dual values by earlier runs (Gorgonia
// accumulates them across RunAll calls, and Reset does not zero them) are
// zeroed first, so they do not leak into the check. Then for each checked
// element it perturbs the bound value in place by ±Eps, reruns the forward
// pass (a machine on the loss's subgraph) and restores the element exactly:
//
//	numeric = (loss(x + Eps) - loss(x - Eps)) / (2 Eps)
//
// An element passes if |analytic - numeric| <= ATol + RTol*max(|analytic|,
// |numeric|) (NaNs never pass). GradCheck returns nil if all checked elements
// pass, otherwise an error naming, for the first few failures, the node, the
// element index and both values, and how many failed. It also returns an
// error (never panics) on a non-scalar or non-float64 loss, on a wrt node
// that is not a bound float64 input of g, if Gorgonia fails to differentiate
// or run the graph, if the forward-only loss differs from the loss of the
// gradient run, or if either run overwrote the value of any float input of
// the loss (Gorgonia's in-place ops on views do that, see the package doc);
// the overwritten values are restored.
//
// Gorgonia keeps the gradient nodes in g; the values of wrt are unchanged on
// return. Each checked element costs two forward runs: use MaxPerNode on
// large nodes.
func GradCheck(g *G.ExprGraph, loss *G.Node, wrt G.Nodes, opts GradCheckOpts) error {
	r, err := GradCheckReport(g, loss, wrt, opts)
	if err != nil {
		return err
	}
	return r.Err()
}

// zeroDualGrad zeroes the gradient that earlier runs of a machine with dual
// values accumulated in n's dual value, if n has one. Node.Grad returns the
// dual value's gradient if n is bound to one, else the value of n's gradient
// node, which must not be touched.
func zeroDualGrad(n *G.Node) {
	gv, err := n.Grad()
	if err != nil || gv == nil {
		return
	}
	if d := n.Deriv(); d != nil && d.Value() == gv {
		return
	}
	switch t := gv.(type) {
	case *tensor.Dense:
		t.Zero()
	case *G.F64:
		*t = 0
	case *G.F32:
		*t = 0
	}
}

// restoreValue writes data back into the float value v.
func restoreValue(v G.Value, data []float64) {
	switch x := v.(type) {
	case *tensor.Dense:
		switch d := x.Data().(type) {
		case []float64:
			copy(d, data)
		case []float32:
			for i := range data {
				if i < len(d) {
					d[i] = float32(data[i])
				}
			}
		}
	case *G.F64:
		*x = G.F64(data[0])
	case *G.F32:
		*x = G.F32(data[0])
	}
}

// elementAccess returns element accessors of the float64 value bound to n,
// which write in place.
func elementAccess(n *G.Node) (get func(int) float64, set func(int, float64), err error) {
	switch v := n.Value().(type) {
	case *tensor.Dense:
		if v.RequiresIterator() {
			return nil, nil, errors.Errorf("graph: GradCheck: the value of %v is a non-contiguous view", n.Name())
		}
		if n.Dims() == 0 {
			break
		}
		d, ok := v.Data().([]float64)
		if !ok || len(d) < n.Shape().TotalSize() {
			return nil, nil, errors.Errorf("graph: GradCheck: the value of %v is not a float64 tensor of shape %v", n.Name(), n.Shape())
		}
		return func(k int) float64 { return d[k] }, func(k int, x float64) { d[k] = x }, nil
	case *G.F64:
		return func(int) float64 { return float64(*v) }, func(_ int, x float64) { *v = G.F64(x) }, nil
	}
	return nil, nil, errors.Errorf("graph: GradCheck: cannot perturb the value of %v (%T)", n.Name(), n.Value())
}

func nodeName(n *G.Node) string {
	if s := n.Name(); s != "" {
		return s
	}
	return fmt.Sprintf("node %d", n.ID())
}

// unravel is the multi-index of flat index k in shape s.
func unravel(k int, s tensor.Shape) []int {
	idx := make([]int, len(s))
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] > 0 {
			idx[i] = k % s[i]
			k /= s[i]
		}
	}
	return idx
}

// scalarOf is the value of a scalar (or one-element) value as float64.
func scalarOf(v G.Value) (float64, error) {
	if v == nil {
		return 0, errors.New("graph: GradCheck: the loss has no value")
	}
	f := valueFloat64s(v)
	if len(f) != 1 {
		return 0, errors.Errorf("graph: GradCheck: the loss has %d elements", len(f))
	}
	return f[0], nil
}

// valueFloat64s copies the data of a float value (tensor or scalar) to a new
// []float64.
func valueFloat64s(v G.Value) []float64 {
	if d, ok := v.(*tensor.Dense); ok && d.RequiresIterator() {
		v = d.Materialize().(*tensor.Dense)
	}
	switch d := v.Data().(type) {
	case []float64:
		return append([]float64(nil), d[:v.Shape().TotalSize()]...)
	case []float32:
		out := make([]float64, v.Shape().TotalSize())
		for i := range out {
			out[i] = float64(d[i])
		}
		return out
	case float64:
		return []float64{d}
	case float32:
		return []float64{float64(d)}
	}
	return nil
}
