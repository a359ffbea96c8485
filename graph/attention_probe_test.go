package graph

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// refProbeStats computes HeadStats from the inputs of an attention case
// directly in float64: scores, softmax over the allowed keys, and the
// figures as HeadStats documents them.
func refProbeStats(c attnCase, q, k, terms, bias, mask *tensor.Dense) []HeadStats {
	scale := c.scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(c.dh))
	}
	qv, kv := valueFloat64s(q), valueFloat64s(k)
	at := func(v []float64, b, h, i, d, t int) float64 {
		if c.merged {
			return v[(b*t+i)*c.h*c.dh+h*c.dh+d]
		}
		return v[((b*c.h+h)*t+i)*c.dh+d]
	}
	// bcastAt reads a [.., Tq, Tk]-broadcastable tensor at (b, h, i, j).
	bcastAt := func(x *tensor.Dense, b, h, i, j int) float64 {
		s, v := x.Shape(), valueFloat64s(x)
		idx := []int{b, h, i, j}[4-len(s):]
		off := 0
		for a, n := range s {
			off = off*n + min(idx[a], n-1)
		}
		return v[off]
	}
	out := make([]HeadStats, c.h)
	for h := range c.h {
		st := HeadStats{EntropyMin: math.Inf(1), ScoreMax: math.Inf(-1), ScoreMin: math.Inf(1)}
		var entSum, posSq float64
		posN, oneHot := 0, 0
		for b := range c.b {
			for i := range c.tq {
				var sc []float64
				for j := range c.tk {
					if mask != nil && bcastAt(mask, b, h, i, j) == 0 {
						continue
					}
					s := 0.0
					for d := range c.dh {
						s += at(qv, b, h, i, d, c.tq) * at(kv, b, h, j, d, c.tk)
					}
					pos := 0.0
					if terms != nil {
						tm := bcastAt(terms, b, h, i, j)
						s += tm
						pos = tm * scale
					}
					s *= scale
					if bias != nil {
						bv := bcastAt(bias, b, h, i, j)
						s += bv
						pos += bv
					}
					if terms != nil || bias != nil {
						posSq += pos * pos
						posN++
					}
					st.ScoreMax, st.ScoreMin = math.Max(st.ScoreMax, s), math.Min(st.ScoreMin, s)
					sc = append(sc, s)
				}
				if len(sc) < 2 {
					continue
				}
				m := math.Inf(-1)
				for _, s := range sc {
					m = math.Max(m, s)
				}
				z := 0.0
				for _, s := range sc {
					z += math.Exp(s - m)
				}
				ent, top := 0.0, 0.0
				for _, s := range sc {
					p := math.Exp(s-m) / z
					if p > 0 {
						ent -= p * math.Log(p)
					}
					top = math.Max(top, p)
				}
				entSum += ent
				st.EntropyMin = math.Min(st.EntropyMin, ent)
				if top >= OneHotThreshold {
					oneHot++
				}
				st.Rows++
			}
		}
		st.EntropyMean, st.OneHot, st.PosRMS = entSum/float64(st.Rows), float64(oneHot)/float64(st.Rows), math.NaN()
		if posN > 0 {
			st.PosRMS = math.Sqrt(posSq / float64(posN))
		}
		out[h] = st
	}
	return out
}

// statsClose compares two HeadStats figure by figure (NaN equals NaN).
func statsClose(got, want HeadStats, tol float64) error {
	g := []float64{got.EntropyMean, got.EntropyMin, got.ScoreMax, got.ScoreMin, got.PosRMS, got.OneHot, float64(got.Rows)}
	w := []float64{want.EntropyMean, want.EntropyMin, want.ScoreMax, want.ScoreMin, want.PosRMS, want.OneHot, float64(want.Rows)}
	names := []string{"EntropyMean", "EntropyMin", "ScoreMax", "ScoreMin", "PosRMS", "OneHot", "Rows"}
	for i := range g {
		if math.IsNaN(g[i]) && math.IsNaN(w[i]) {
			continue
		}
		if !(math.Abs(g[i]-w[i]) <= tol*(1+math.Abs(w[i]))) {
			return fmt.Errorf("%s = %v, want %v", names[i], g[i], w[i])
		}
	}
	return nil
}

// runProbed builds AttentionProbs for c with an armed probe, runs it and
// returns the probe, the probabilities and the inputs.
func runProbed(t *testing.T, c attnCase, dt tensor.Dtype, seed int64, probe *AttentionProbe) (probs []float64, in map[string]*tensor.Dense) {
	t.Helper()
	g, p, _ := buildAttnWith(t, c, dt, true, seed, probe)
	in = map[string]*tensor.Dense{}
	for _, n := range g.AllNodes() {
		if n.IsVar() {
			in[n.Name()] = n.Value().(*tensor.Dense)
		}
	}
	run(t, g)
	return valueFloat64s(p.Value()), in
}

// TestAttentionProbeMatchesReference checks every figure of every head
// against refProbeStats, with terms, broadcast biases, causal and padding
// masks (a fully masked row included), both head layouts and both dtypes,
// and that recording leaves the probabilities bit for bit unchanged.
func TestAttentionProbeMatchesReference(t *testing.T) {
	for ci, c := range attnCases() {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			probe := NewAttentionProbe()
			probe.Arm()
			got, in := runProbed(t, c, dt, int64(30+ci), probe)
			plain, _ := runProbed(t, c, dt, int64(30+ci), nil)
			for i := range got {
				if math.Float64bits(got[i]) != math.Float64bits(plain[i]) {
					t.Fatalf("case %d %v: probs[%d] = %v with the probe, %v without", ci, dt, i, got[i], plain[i])
				}
			}
			want := refProbeStats(c, in["q"], in["k"], in["terms"], in["bias"], in["mask"])
			stats := probe.Stats()
			if len(stats) != c.h {
				t.Fatalf("case %d %v: %d heads recorded, want %d", ci, dt, len(stats), c.h)
			}
			tol := 1e-12
			if dt == tensor.Float32 {
				tol = 2e-5
			}
			for h := range stats {
				if err := statsClose(stats[h], want[h], tol); err != nil {
					t.Errorf("case %d %v head %d: %v", ci, dt, h, err)
				}
			}
		}
	}
}

// TestAttentionProbeKnownMatrix checks the figures on attention matrices
// known in closed form: uniform causal attention (entropy ln n over n keys)
// and a bias that puts all of each query's attention on its first key.
func TestAttentionProbeKnownMatrix(t *testing.T) {
	const tq, big = 4, 20.0
	g := G.NewGraph()
	zero := func(name string) *G.Node {
		return input(g, name, fromFloat64(tensor.Float64, tensor.Shape{1, 2, tq, 3}, make([]float64, 2*tq*3)))
	}
	q, k := zero("q"), zero("k")
	// head 0: no bias (zero); head 1: +big on key 0
	bv := make([]float64, 2*tq*tq)
	for i := range tq {
		bv[tq*tq+i*tq] = big
	}
	bias := input(g, "bias", fromFloat64(tensor.Float64, tensor.Shape{2, tq, tq}, bv))
	mask := input(g, "mask", attnMask(attnCase{tq: tq, tk: tq, mask: "causal"}, tensor.Float64))
	probe := NewAttentionProbe()
	must(t)(AttentionProbs(q, k, AttentionOpts{Bias: bias, Mask: mask, Probe: probe}))
	run(t, g)
	if s := probe.Stats(); s != nil {
		t.Fatalf("an unarmed probe recorded %v", s)
	}
	probe.Arm()
	run(t, g)
	s := probe.Stats()
	ln := math.Log
	// head 0: rows with 2, 3, 4 keys (the first query's single key does not count)
	want0 := HeadStats{EntropyMean: (ln(2) + ln(3) + ln(4)) / 3, EntropyMin: ln(2), ScoreMax: 0, ScoreMin: 0, PosRMS: 0, OneHot: 0, Rows: 3}
	// head 1: row i puts 1/(1 + i e^-big) on key 0
	var ent1 []float64
	for i := 1; i < tq; i++ {
		p0 := 1 / (1 + float64(i)*math.Exp(-big))
		r := (1 - p0) / float64(i)
		ent1 = append(ent1, -p0*ln(p0)-float64(i)*r*ln(r))
	}
	// PosRMS over the 10 allowed entries: 4 hold big, 6 hold 0
	want1 := HeadStats{EntropyMean: (ent1[0] + ent1[1] + ent1[2]) / 3, EntropyMin: ent1[0], ScoreMax: big, ScoreMin: 0,
		PosRMS: big * math.Sqrt(4.0/10), OneHot: 1, Rows: 3}
	for h, w := range []HeadStats{want0, want1} {
		if err := statsClose(s[h], w, 1e-12); err != nil {
			t.Errorf("head %d: %v", h, err)
		}
	}
	// Runs accumulate until the next Arm; Disarm keeps what was recorded.
	run(t, g)
	probe.Disarm()
	run(t, g)
	if r := probe.Stats()[0].Rows; r != 6 {
		t.Errorf("after two armed runs head 0 counted %d rows, want 6", r)
	}
	probe.Arm()
	if s := probe.Stats(); s != nil {
		t.Errorf("Arm did not clear the statistics: %v", s)
	}
}

// TestAttentionProbeNaN: a NaN score makes the score extremes NaN rather
// than being skipped.
func TestAttentionProbeNaN(t *testing.T) {
	c := attnCases()[0]
	rng := rand.New(rand.NewSource(3))
	g := G.NewGraph()
	qv := randDense(rng, tensor.Float32, 1, c.b, c.tq, c.h*c.dh)
	qv.Data().([]float32)[0] = float32(math.NaN())
	q, k := input(g, "q", qv), input(g, "k", randDense(rng, tensor.Float32, 1, c.b, c.tk, c.h*c.dh))
	probe := NewAttentionProbe()
	probe.Arm()
	must(t)(AttentionProbs(q, k, AttentionOpts{Heads: c.h, Probe: probe}))
	run(t, g)
	if s := probe.Stats()[0]; !math.IsNaN(s.ScoreMax) || !math.IsNaN(s.ScoreMin) {
		t.Errorf("a NaN query gave ScoreMax %v, ScoreMin %v; want NaN", s.ScoreMax, s.ScoreMin)
	}
	if s := probe.Stats()[1]; math.IsNaN(s.ScoreMax) {
		t.Errorf("head 1 has no NaN but ScoreMax is NaN")
	}
}
