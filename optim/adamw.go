package optim

import (
	"math"
	"sort"
	"strings"

	"github.com/pkg/errors"
)

// AdamW is Adam with decoupled weight decay (Loshchilov & Hutter 2019;
// Adam: Kingma & Ba 2015), with the semantics of PyTorch's torch.optim.AdamW
// (amsgrad=False, maximize=False). For each parameter p with gradient g, at
// its t-th update (t = 1, 2, ...) with learning rate lr:
//
//	p ← p − lr·λ·p                  (decoupled decay; skipped if NoDecay)
//	m ← β1·m + (1−β1)·g
//	v ← β2·v + (1−β2)·g²
//	m̂ = m / (1−β1^t),  v̂ = v / (1−β2^t)
//	p ← p − lr·m̂ / (√v̂ + ε)
//
// with m = v = 0 before the first update. The last line is evaluated as
// PyTorch does, p − (lr/(1−β1^t))·m / (√v/√(1−β2^t) + ε). The decay is applied
// to the value before the Adam update and is multiplied by lr (PyTorch's
// convention; the paper multiplies by the schedule multiplier only).
//
// Arithmetic and the moments m, v are float64 whatever the dtype of the
// parameter; updated values are rounded back to the parameter's dtype. Each
// parameter has its own step count t, as in PyTorch, so a parameter first seen
// at a later Step starts with t = 1.
//
// The zero value has a zero learning rate and zero hyperparameters; use
// NewAdamW.
type AdamW struct {
	Beta1, Beta2, Eps, WeightDecay float64

	lr     float64
	state  map[string]*adamState
	loaded map[string]bool // param names restored by LoadState, checked by the next Step
}

type adamState struct {
	step int
	m, v []float64 // exp_avg, exp_avg_sq
}

var _ Optimizer = (*AdamW)(nil)

// NewAdamW returns an AdamW optimiser with learning rate lr, moment decay
// rates beta1 and beta2, denominator constant eps and decoupled weight decay
// weightDecay (λ). PyTorch's defaults are 1e-3, 0.9, 0.999, 1e-8, 1e-2.
// NewAdamW does not validate its arguments; Step returns an error unless
// lr >= 0, 0 <= beta1, beta2 < 1, eps >= 0, weightDecay >= 0, all finite.
func NewAdamW(lr, beta1, beta2, eps, weightDecay float64) *AdamW {
	return &AdamW{
		Beta1:       beta1,
		Beta2:       beta2,
		Eps:         eps,
		WeightDecay: weightDecay,
		lr:          lr,
		state:       map[string]*adamState{},
	}
}

// SetLR sets the learning rate of the following Steps.
func (o *AdamW) SetLR(lr float64) { o.lr = lr }

// LR returns the current learning rate.
func (o *AdamW) LR() float64 { return o.lr }

func (o *AdamW) checkHyper() error {
	const fn = "AdamW.Step"
	for _, e := range []error{
		checkHyper(fn, "lr", o.lr, 0, math.Inf(1), true),
		checkHyper(fn, "Beta1", o.Beta1, 0, 1, true),
		checkHyper(fn, "Beta2", o.Beta2, 0, 1, true),
		checkHyper(fn, "Eps", o.Eps, 0, math.Inf(1), true),
		checkHyper(fn, "WeightDecay", o.WeightDecay, 0, math.Inf(1), true),
	} {
		if e != nil {
			return e
		}
	}
	return nil
}

// Step applies one AdamW update to every parameter of ps and then zeroes their
// gradients. See Optimizer.Step for the errors; on error nothing is modified.
func (o *AdamW) Step(ps []Param) error {
	const fn = "AdamW.Step"
	if o.state == nil {
		o.state = map[string]*adamState{}
	}
	if err := o.checkHyper(); err != nil {
		return err
	}
	qs, err := check(fn, ps)
	if err != nil {
		return err
	}
	if err := checkLoaded(fn, qs, o.loaded); err != nil {
		return err
	}
	for _, q := range qs {
		if s, ok := o.state[q.name]; ok && len(s.m) != q.n {
			return errors.Errorf("optim: %s: param %q: has %d elements but its state has %d", fn, q.name, q.n, len(s.m))
		}
	}
	o.loaded = nil

	for _, q := range qs {
		s, ok := o.state[q.name]
		if !ok {
			s = &adamState{m: make([]float64, q.n), v: make([]float64, q.n)}
			o.state[q.name] = s
		}
		s.step++
		t := float64(s.step)
		c := adamConsts{
			decay:    1,
			b1:       o.Beta1,
			b2:       o.Beta2,
			eps:      o.Eps,
			stepSize: o.lr / (1 - math.Pow(o.Beta1, t)),
			bc2Sqrt:  math.Sqrt(1 - math.Pow(o.Beta2, t)),
		}
		if !q.noDecay {
			c.decay = 1 - o.lr*o.WeightDecay
		}
		switch p := q.p.(type) {
		case []float32:
			adamw(p, q.g.([]float32), s.m, s.v, c)
		case []float64:
			adamw(p, q.g.([]float64), s.m, s.v, c)
		}
	}
	return nil
}

type adamConsts struct {
	decay, b1, b2, eps, stepSize, bc2Sqrt float64
}

// adamw updates p in place and zeroes g.
func adamw[T float32 | float64](p, g []T, m, v []float64, c adamConsts) {
	m = m[:len(p)]
	v = v[:len(p)]
	g = g[:len(p)]
	for i := range p {
		x := float64(p[i]) * c.decay
		gi := float64(g[i])
		mi := c.b1*m[i] + (1-c.b1)*gi
		vi := c.b2*v[i] + (1-c.b2)*gi*gi
		m[i], v[i] = mi, vi
		x -= c.stepSize * mi / (math.Sqrt(vi)/c.bc2Sqrt + c.eps)
		p[i] = T(x)
		g[i] = 0
	}
}

// State keys of AdamW. For a parameter named N the state holds
// "exp_avg/N" (m), "exp_avg_sq/N" (v) and "step/N" (t, one element); the
// learning rate is "lr" (one element). The names are PyTorch's.
const (
	keyLR       = "lr"
	keyExpAvg   = "exp_avg/"
	keyExpAvgSq = "exp_avg_sq/"
	keyStep     = "step/"
)

// State returns a deep copy of the optimiser state: "lr" and, for every
// parameter N updated so far, "exp_avg/N", "exp_avg_sq/N" and "step/N".
func (o *AdamW) State() map[string][]float64 {
	st := map[string][]float64{keyLR: {o.lr}}
	for name, s := range o.state {
		st[keyExpAvg+name] = copyOf(s.m)
		st[keyExpAvgSq+name] = copyOf(s.v)
		st[keyStep+name] = []float64{float64(s.step)}
	}
	return st
}

// LoadState replaces the optimiser state (learning rate, moments, step counts)
// by a copy of st, as returned by State. It returns an error and leaves the
// optimiser unchanged if "lr" is missing, a key is unknown, a parameter lacks
// one of its three entries, its moments differ in length, or its step count
// is not a positive integer. The hyperparameters (Beta1, Beta2, Eps,
// WeightDecay) are not part of the state. The next Step returns an error if
// its parameter names are not exactly those of st.
func (o *AdamW) LoadState(st map[string][]float64) error {
	const fn = "AdamW.LoadState"
	lr, err := loadLR(fn, st)
	if err != nil {
		return err
	}
	ms := map[string][]float64{}
	vs := map[string][]float64{}
	steps := map[string][]float64{}
	for _, k := range sortedKeys(st) {
		switch {
		case k == keyLR:
		case strings.HasPrefix(k, keyExpAvg) && len(k) > len(keyExpAvg):
			ms[k[len(keyExpAvg):]] = st[k]
		case strings.HasPrefix(k, keyExpAvgSq) && len(k) > len(keyExpAvgSq):
			vs[k[len(keyExpAvgSq):]] = st[k]
		case strings.HasPrefix(k, keyStep) && len(k) > len(keyStep):
			steps[k[len(keyStep):]] = st[k]
		default:
			return errors.Errorf("optim: %s: unknown key %q", fn, k)
		}
	}
	state := map[string]*adamState{}
	loaded := map[string]bool{}
	names := unionKeys(ms, vs, steps)
	for _, name := range names {
		m, okm := ms[name]
		v, okv := vs[name]
		t, okt := steps[name]
		switch {
		case !okm:
			return errors.Errorf("optim: %s: param %q: missing %q", fn, name, keyExpAvg+name)
		case !okv:
			return errors.Errorf("optim: %s: param %q: missing %q", fn, name, keyExpAvgSq+name)
		case !okt:
			return errors.Errorf("optim: %s: param %q: missing %q", fn, name, keyStep+name)
		case len(m) != len(v):
			return errors.Errorf("optim: %s: param %q: exp_avg has %d elements, exp_avg_sq %d", fn, name, len(m), len(v))
		}
		step, err := loadCount(fn, keyStep+name, t, 1)
		if err != nil {
			return err
		}
		state[name] = &adamState{step: step, m: copyOf(m), v: copyOf(v)}
		loaded[name] = true
	}
	o.lr = lr
	o.state = state
	o.loaded = nil
	if len(loaded) > 0 {
		o.loaded = loaded
	}
	return nil
}

func loadLR(fn string, st map[string][]float64) (float64, error) {
	x, ok := st[keyLR]
	if !ok {
		return 0, errors.Errorf("optim: %s: missing %q", fn, keyLR)
	}
	if len(x) != 1 {
		return 0, errors.Errorf("optim: %s: %q has %d elements, want 1", fn, keyLR, len(x))
	}
	return x[0], nil
}

// loadCount returns x[0] as an int >= min, or an error.
func loadCount(fn, key string, x []float64, min int) (int, error) {
	if len(x) != 1 {
		return 0, errors.Errorf("optim: %s: %q has %d elements, want 1", fn, key, len(x))
	}
	if !(x[0] >= float64(min)) || x[0] != math.Trunc(x[0]) || x[0] > 1<<53 {
		return 0, errors.Errorf("optim: %s: %q = %v: want an integer >= %d", fn, key, x[0], min)
	}
	return int(x[0]), nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func unionKeys(ms ...map[string][]float64) []string {
	u := map[string]bool{}
	for _, m := range ms {
		for k := range m {
			u[k] = true
		}
	}
	return sortedKeys(u)
}
