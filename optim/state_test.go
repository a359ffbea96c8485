package optim

import (
	"math"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"gorgonia.org/tensor"
)

// model is a small set of params of both dtypes, with and without decay.
type model struct{ ps []Param }

func newModel(rng *rand.Rand) *model {
	mk64 := func(shape ...int) *tensor.Dense {
		d := tensor.New(tensor.WithShape(shape...), tensor.Of(tensor.Float64))
		for i := range d.Data().([]float64) {
			d.Data().([]float64)[i] = rng.NormFloat64()
		}
		return d
	}
	mk32 := func(shape ...int) *tensor.Dense {
		d := tensor.New(tensor.WithShape(shape...), tensor.Of(tensor.Float32))
		for i := range d.Data().([]float32) {
			d.Data().([]float32)[i] = float32(rng.NormFloat64())
		}
		return d
	}
	return &model{ps: []Param{
		{Name: "emb", Value: mk64(3, 4), Grad: mk64(3, 4)},
		{Name: "ln.bias", Value: mk32(5), Grad: mk32(5), NoDecay: true},
		{Name: "w32", Value: mk32(2, 3), Grad: mk32(2, 3)},
		{Name: "pos/table", Value: mk64(2), Grad: mk64(2), NoDecay: true},
	}}
}

// clone returns a deep copy of m.
func (m *model) clone() *model {
	c := &model{ps: make([]Param, len(m.ps))}
	for i, p := range m.ps {
		c.ps[i] = Param{Name: p.Name, Value: p.Value.Clone().(tensor.Tensor), Grad: p.Grad.Clone().(tensor.Tensor), NoDecay: p.NoDecay}
	}
	return c
}

// fillGrads writes the same pseudo-random gradients (from seed) into m.
func (m *model) fillGrads(seed int64) {
	rng := rand.New(rand.NewSource(seed))
	for _, p := range m.ps {
		switch g := p.Grad.Data().(type) {
		case []float64:
			for i := range g {
				g[i] = rng.NormFloat64()
			}
		case []float32:
			for i := range g {
				g[i] = float32(rng.NormFloat64())
			}
		}
	}
}

// sameValues reports whether a and b hold bitwise identical values.
func sameValues(t *testing.T, a, b *model) {
	t.Helper()
	for i := range a.ps {
		if !reflect.DeepEqual(a.ps[i].Value.Data(), b.ps[i].Value.Data()) {
			t.Errorf("param %q differs:\n%v\n%v", a.ps[i].Name, a.ps[i].Value.Data(), b.ps[i].Value.Data())
		}
	}
}

// Run 3 steps, save the state, load it into a fresh optimiser over a copy of
// the params, and check that both continue bit for bit identically.
func TestStateRoundTrip(t *testing.T) {
	sched := WarmupCosine{Peak: 0.05, Warmup: 2, Total: 8, Floor: 0.1}
	for _, mk := range []struct {
		name string
		new  func() Optimizer
	}{
		{"AdamW", func() Optimizer { return NewAdamW(123, 0.9, 0.98, 1e-8, 0.1) }},
		{"SGD", func() Optimizer { return NewSGD(123, 0.9, 0.01) }},
		{"SGD,μ=0", func() Optimizer { return NewSGD(123, 0, 0.01) }},
	} {
		t.Run(mk.name, func(t *testing.T) {
			a := newModel(rand.New(rand.NewSource(1)))
			optA := mk.new()
			for s := 0; s < 3; s++ {
				a.fillGrads(int64(100 + s))
				optA.SetLR(sched.LR(s))
				if err := optA.Step(a.ps); err != nil {
					t.Fatal(err)
				}
			}
			st := optA.State()
			saved := deepCopy(st)

			b := a.clone()
			optB := mk.new()
			if err := optB.LoadState(st); err != nil {
				t.Fatal(err)
			}
			if optB.LR() != sched.LR(2) {
				t.Errorf("LR after LoadState = %v, want %v", optB.LR(), sched.LR(2))
			}
			// LoadState copies: scribbling over st does not affect optB.
			for _, x := range st {
				for i := range x {
					x[i] = math.NaN()
				}
			}
			for s := 3; s < 6; s++ {
				a.fillGrads(int64(100 + s))
				b.fillGrads(int64(100 + s))
				optA.SetLR(sched.LR(s))
				optB.SetLR(sched.LR(s))
				if err := optA.Step(a.ps); err != nil {
					t.Fatal(err)
				}
				if err := optB.Step(b.ps); err != nil {
					t.Fatal(err)
				}
				sameValues(t, a, b)
			}
			if !reflect.DeepEqual(optA.State(), optB.State()) {
				t.Errorf("states differ after 3 more steps:\n%v\n%v", optA.State(), optB.State())
			}
			// State returned a copy: stepping optA did not change saved state.
			if reflect.DeepEqual(optA.State(), saved) && mk.name != "SGD,μ=0" {
				t.Error("state did not change over 3 steps")
			}
		})
	}
}

func deepCopy(st map[string][]float64) map[string][]float64 {
	c := map[string][]float64{}
	for k, v := range st {
		c[k] = copyOf(v)
	}
	return c
}

// The state keys are documented: check them on a 1-param AdamW.
func TestAdamWStateKeys(t *testing.T) {
	opt := NewAdamW(0.1, 0.9, 0.999, 1e-8, 0)
	if got := opt.State(); !reflect.DeepEqual(got, map[string][]float64{"lr": {0.1}}) {
		t.Errorf("fresh state = %v", got)
	}
	// A fresh optimiser's state loads and allows any params afterwards.
	if err := NewAdamW(1, 0.9, 0.999, 1e-8, 0).LoadState(opt.State()); err != nil {
		t.Error(err)
	}
	ps := []Param{{Name: "w", Value: vec64(1, 2), Grad: vec64(1, 1)}}
	if err := opt.Step(ps); err != nil {
		t.Fatal(err)
	}
	want := []string{"exp_avg/w", "exp_avg_sq/w", "lr", "step/w"}
	if got := sortedKeys(opt.State()); !reflect.DeepEqual(got, want) {
		t.Errorf("keys = %v, want %v", got, want)
	}
}

func TestLoadStateErrors(t *testing.T) {
	good := func() map[string][]float64 {
		return map[string][]float64{
			"lr":           {0.1},
			"exp_avg/w":    {1, 2},
			"exp_avg_sq/w": {3, 4},
			"step/w":       {7},
		}
	}
	cases := []struct {
		name string
		edit func(st map[string][]float64)
		want string
	}{
		{"missing lr", func(st map[string][]float64) { delete(st, "lr") }, `"lr"`},
		{"lr length", func(st map[string][]float64) { st["lr"] = []float64{1, 2} }, `"lr"`},
		{"unknown key", func(st map[string][]float64) { st["momentum_buffer/w"] = []float64{0, 0} }, `unknown key "momentum_buffer/w"`},
		{"empty name", func(st map[string][]float64) { st["exp_avg/"] = []float64{0} }, `unknown key "exp_avg/"`},
		{"missing exp_avg_sq", func(st map[string][]float64) { delete(st, "exp_avg_sq/w") }, `"exp_avg_sq/w"`},
		{"missing exp_avg", func(st map[string][]float64) { delete(st, "exp_avg/w") }, `"exp_avg/w"`},
		{"missing step", func(st map[string][]float64) { delete(st, "step/w") }, `"step/w"`},
		{"length", func(st map[string][]float64) { st["exp_avg_sq/w"] = []float64{3} }, `"w"`},
		{"step 0", func(st map[string][]float64) { st["step/w"] = []float64{0} }, `"step/w"`},
		{"step 1.5", func(st map[string][]float64) { st["step/w"] = []float64{1.5} }, `"step/w"`},
		{"step NaN", func(st map[string][]float64) { st["step/w"] = []float64{math.NaN()} }, `"step/w"`},
	}
	for _, c := range cases {
		opt := NewAdamW(0.5, 0.9, 0.999, 1e-8, 0)
		if err := opt.Step([]Param{{Name: "v", Value: vec64(1), Grad: vec64(1)}}); err != nil {
			t.Fatal(err)
		}
		before := opt.State()
		st := good()
		c.edit(st)
		err := opt.LoadState(st)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %s", c.name, err, c.want)
		}
		if !reflect.DeepEqual(opt.State(), before) {
			t.Errorf("%s: state changed despite the error", c.name)
		}
	}
	// The unedited state loads.
	if err := NewAdamW(0.5, 0.9, 0.999, 1e-8, 0).LoadState(good()); err != nil {
		t.Error(err)
	}
	// SGD: unknown key and missing lr.
	if err := NewSGD(0.1, 0.9, 0).LoadState(good()); err == nil || !strings.Contains(err.Error(), "unknown key") {
		t.Errorf("SGD with AdamW state: error %v", err)
	}
	if err := NewSGD(0.1, 0.9, 0).LoadState(map[string][]float64{"momentum_buffer/w": {1}}); err == nil || !strings.Contains(err.Error(), `"lr"`) {
		t.Errorf("SGD without lr: error %v", err)
	}
}

// After LoadState, the next Step requires exactly the params of the state,
// each of the recorded size.
func TestStepAfterLoadStateErrors(t *testing.T) {
	st := map[string][]float64{
		"lr":           {0.1},
		"exp_avg/w":    {1, 2},
		"exp_avg_sq/w": {3, 4},
		"step/w":       {7},
	}
	sgdSt := map[string][]float64{"lr": {0.1}, "momentum_buffer/w": {1, 2}}
	cases := []struct {
		name string
		ps   []Param
		want []string
	}{
		{"param missing from state", []Param{
			{Name: "w", Value: vec64(1, 2), Grad: vec64(1, 2)},
			{Name: "extra", Value: vec64(1), Grad: vec64(1)},
		}, []string{`"extra"`, "no entry"}},
		{"param missing from state, state param missing", []Param{
			{Name: "other", Value: vec64(1, 2), Grad: vec64(1, 2)},
		}, []string{`"other"`}},
		{"state param missing", nil, []string{`"w"`, "not among the 0 params"}},
		{"size", []Param{
			{Name: "w", Value: vec64(1, 2, 3), Grad: vec64(1, 2, 3)},
		}, []string{`"w"`, "3 elements", "2"}},
	}
	for _, c := range cases {
		for _, opt := range []Optimizer{NewAdamW(0.1, 0.9, 0.999, 1e-8, 0), NewSGD(0.1, 0.9, 0)} {
			s := st
			if _, ok := opt.(*SGD); ok {
				s = sgdSt
			}
			if err := opt.LoadState(s); err != nil {
				t.Fatal(err)
			}
			err := opt.Step(c.ps)
			if err == nil {
				t.Errorf("%s, %T: no error", c.name, opt)
				continue
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s, %T: error %q does not contain %s", c.name, opt, err, w)
				}
			}
			if !reflect.DeepEqual(opt.State(), s) {
				t.Errorf("%s, %T: state changed despite the error", c.name, opt)
			}
		}
	}
	// With the right params, the step goes through and the check is cleared.
	opt := NewAdamW(0.1, 0.9, 0.999, 1e-8, 0)
	if err := opt.LoadState(st); err != nil {
		t.Fatal(err)
	}
	w := Param{Name: "w", Value: vec64(1, 2), Grad: vec64(1, 2)}
	if err := opt.Step([]Param{w}); err != nil {
		t.Fatal(err)
	}
	if got := opt.State()["step/w"]; got[0] != 8 {
		t.Errorf("step after loading 7 and stepping = %v, want 8", got)
	}
	if err := opt.Step([]Param{w, {Name: "new", Value: vec64(1), Grad: vec64(1)}}); err != nil {
		t.Errorf("a new param after the first post-load Step: %v", err)
	}
}
