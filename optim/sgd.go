package optim

import (
	"math"
	"strings"

	"github.com/pkg/errors"
)

// SGD is stochastic gradient descent with momentum and coupled weight decay,
// with the semantics of PyTorch's torch.optim.SGD (dampening=0,
// nesterov=False, maximize=False). For each parameter p with gradient g and
// learning rate lr:
//
//	d ← g + λ·p                     (coupled decay; skipped if NoDecay)
//	b ← d                           (first update of p, if μ ≠ 0)
//	b ← μ·b + d                     (later updates, if μ ≠ 0)
//	p ← p − lr·b                    (p ← p − lr·d if μ = 0)
//
// Arithmetic and the momentum buffer b are float64 whatever the dtype of the
// parameter; updated values are rounded back to the parameter's dtype.
//
// The zero value has a zero learning rate and zero hyperparameters; use
// NewSGD.
type SGD struct {
	Momentum, WeightDecay float64

	lr     float64
	buf    map[string][]float64 // momentum buffers
	loaded map[string]bool      // param names restored by LoadState, checked by the next Step
}

var _ Optimizer = (*SGD)(nil)

// NewSGD returns an SGD optimiser with learning rate lr, momentum μ and
// coupled weight decay λ. NewSGD does not validate its arguments; Step returns
// an error unless lr, momentum and weightDecay are finite and >= 0.
func NewSGD(lr, momentum, weightDecay float64) *SGD {
	return &SGD{Momentum: momentum, WeightDecay: weightDecay, lr: lr, buf: map[string][]float64{}}
}

// SetLR sets the learning rate of the following Steps.
func (o *SGD) SetLR(lr float64) { o.lr = lr }

// LR returns the current learning rate.
func (o *SGD) LR() float64 { return o.lr }

// Step applies one SGD update to every parameter of ps and then zeroes their
// gradients. See Optimizer.Step for the errors; on error nothing is modified.
func (o *SGD) Step(ps []Param) error {
	const fn = "SGD.Step"
	if o.buf == nil {
		o.buf = map[string][]float64{}
	}
	for _, e := range []error{
		checkHyper(fn, "lr", o.lr, 0, math.Inf(1), true),
		checkHyper(fn, "Momentum", o.Momentum, 0, math.Inf(1), true),
		checkHyper(fn, "WeightDecay", o.WeightDecay, 0, math.Inf(1), true),
	} {
		if e != nil {
			return e
		}
	}
	qs, err := check(fn, ps)
	if err != nil {
		return err
	}
	if err := checkLoaded(fn, qs, o.loaded); err != nil {
		return err
	}
	for _, q := range qs {
		if b, ok := o.buf[q.name]; ok && len(b) != q.n {
			return errors.Errorf("optim: %s: param %q: has %d elements but its momentum buffer has %d", fn, q.name, q.n, len(b))
		}
	}
	o.loaded = nil

	for _, q := range qs {
		c := sgdConsts{lr: o.lr, mu: o.Momentum}
		if !q.noDecay {
			c.wd = o.WeightDecay
		}
		var b []float64
		if o.Momentum != 0 {
			var ok bool
			if b, ok = o.buf[q.name]; !ok {
				b = make([]float64, q.n)
				o.buf[q.name] = b
				c.first = true
			}
		}
		switch p := q.p.(type) {
		case []float32:
			sgd(p, q.g.([]float32), b, c)
		case []float64:
			sgd(p, q.g.([]float64), b, c)
		}
	}
	return nil
}

type sgdConsts struct {
	lr, mu, wd float64
	first      bool // b ← d
}

// sgd updates p in place and zeroes g; b is nil if there is no momentum.
func sgd[T float32 | float64](p, g []T, b []float64, c sgdConsts) {
	g = g[:len(p)]
	for i := range p {
		x := float64(p[i])
		d := float64(g[i])
		if c.wd != 0 {
			d += c.wd * x
		}
		if b != nil {
			if c.first {
				b[i] = d
			} else {
				b[i] = c.mu*b[i] + d
			}
			d = b[i]
		}
		p[i] = T(x - c.lr*d)
		g[i] = 0
	}
}

// keyMomentum prefixes the momentum buffer of a parameter in SGD's state.
const keyMomentum = "momentum_buffer/"

// State returns a deep copy of the optimiser state: "lr" (one element) and, if
// Momentum is or was non-zero, "momentum_buffer/N" for every parameter N
// updated so far.
func (o *SGD) State() map[string][]float64 {
	st := map[string][]float64{keyLR: {o.lr}}
	for name, b := range o.buf {
		st[keyMomentum+name] = copyOf(b)
	}
	return st
}

// LoadState replaces the optimiser state (learning rate, momentum buffers) by
// a copy of st, as returned by State. It returns an error and leaves the
// optimiser unchanged if "lr" is missing or a key is unknown. Momentum and
// WeightDecay are not part of the state. The next Step returns an error if st
// holds momentum buffers and its parameter names are not exactly those of st.
func (o *SGD) LoadState(st map[string][]float64) error {
	const fn = "SGD.LoadState"
	lr, err := loadLR(fn, st)
	if err != nil {
		return err
	}
	buf := map[string][]float64{}
	loaded := map[string]bool{}
	for _, k := range sortedKeys(st) {
		switch {
		case k == keyLR:
		case strings.HasPrefix(k, keyMomentum) && len(k) > len(keyMomentum):
			name := k[len(keyMomentum):]
			buf[name] = copyOf(st[k])
			loaded[name] = true
		default:
			return errors.Errorf("optim: %s: unknown key %q", fn, k)
		}
	}
	o.lr = lr
	o.buf = buf
	o.loaded = nil
	if len(loaded) > 0 {
		o.loaded = loaded
	}
	return nil
}
