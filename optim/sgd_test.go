package optim

import "testing"

// Two SGD steps on p = [1, -2] with lr = 0.1, gradients g1 = [0.5, -1] then
// g2 = [-0.25, 2].
func TestSGDTwoSteps(t *testing.T) {
	cases := []struct {
		name         string
		mu, wd       float64
		noDecay      bool
		p1, p2, buf2 []float64
	}{
		{
			// μ = 0.9, coupled decay λ = 0.01.
			// Step 1: d = g1 + 0.01·p0 = [0.5+0.01, -1-0.02] = [0.51, -1.02]
			//         b = d (first step)
			//         p1 = p0 - 0.1·b = [1-0.051, -2+0.102] = [0.949, -1.898]
			// Step 2: d = g2 + 0.01·p1 = [-0.25+0.00949, 2-0.01898] = [-0.24051, 1.98102]
			//         b = 0.9·[0.51, -1.02] + d = [0.459-0.24051, -0.918+1.98102] = [0.21849, 1.06302]
			//         p2 = p1 - 0.1·b = [0.949-0.021849, -1.898-0.106302] = [0.927151, -2.004302]
			name: "momentum+decay", mu: 0.9, wd: 0.01,
			p1: []float64{0.949, -1.898}, p2: []float64{0.927151, -2.004302}, buf2: []float64{0.21849, 1.06302},
		},
		{
			// NoDecay: d = g.
			// Step 1: b = g1 = [0.5, -1]; p1 = [1-0.05, -2+0.1] = [0.95, -1.9]
			// Step 2: b = 0.9·[0.5, -1] + [-0.25, 2] = [0.2, 1.1]; p2 = [0.95-0.02, -1.9-0.11] = [0.93, -2.01]
			name: "momentum,NoDecay", mu: 0.9, wd: 0.01, noDecay: true,
			p1: []float64{0.95, -1.9}, p2: []float64{0.93, -2.01}, buf2: []float64{0.2, 1.1},
		},
		{
			// μ = 0, λ = 0: plain gradient descent, no buffer.
			// p1 = [1-0.05, -2+0.1] = [0.95, -1.9]; p2 = [0.95+0.025, -1.9-0.2] = [0.975, -2.1]
			name: "plain",
			p1:   []float64{0.95, -1.9}, p2: []float64{0.975, -2.1},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, f32 := range []bool{false, true} {
				opt := NewSGD(0.1, c.mu, c.wd)
				p, g := vec64(1, -2), vec64(0.5, -1)
				get := func() []float64 { return p.Data().([]float64) }
				setGrad := func() { set64(g, -0.25, 2) }
				tol := 1e-15
				if f32 {
					p, g = vec32(1, -2), vec32(0.5, -1)
					get = func() []float64 { return as64(p.Data().([]float32)) }
					setGrad = func() { set32(g, -0.25, 2) }
					tol = 2e-7
				}
				ps := []Param{{Name: "w", Value: p, Grad: g, NoDecay: c.noDecay}}
				if err := opt.Step(ps); err != nil {
					t.Fatal(err)
				}
				checkClose(t, "p1", get(), c.p1, tol)
				if !allZero(g) {
					t.Errorf("grad not zeroed: %v", g.Data())
				}
				setGrad()
				if err := opt.Step(ps); err != nil {
					t.Fatal(err)
				}
				checkClose(t, "p2", get(), c.p2, tol)
				buf, ok := opt.State()["momentum_buffer/w"]
				if c.buf2 == nil {
					if ok {
						t.Errorf("momentum buffer kept with μ = 0: %v", buf)
					}
				} else {
					checkClose(t, "buffer", buf, c.buf2, 10*tol)
				}
			}
		})
	}
}
