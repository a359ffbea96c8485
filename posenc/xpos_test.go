package posenc_test

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// TestXPosScores: the xPos score of query position n and key position m is
// the RoPE score split by rotation pair, pair p weighted by
// ζ_p^((n-m)/γ), whatever the span's offsets (and so the centre), for both
// pairings and partial rotary.
func TestXPosScores(t *testing.T) {
	for _, c := range []struct {
		o              posenc.Options
		qStart, kStart int
		tq, tk         int
	}{
		{posenc.Options{XPosScaleBase: 4}, 0, 0, 5, 5},
		{posenc.Options{XPosScaleBase: 4, RopePairing: "interleaved"}, 9, 4, 3, 8},
		{posenc.Options{XPosScaleBase: 3, RopeFraction: 0.5, RopeBase: 50}, 20, 0, 2, 22},
		{posenc.Options{}, 100, 90, 4, 14},
	} {
		const dh = 8
		rng := rand.New(rand.NewSource(int64(c.qStart + c.tk)))
		qs, ks := make([][]float64, c.tq), make([][]float64, c.tk)
		for i := range qs {
			qs[i] = randVec(rng, dh)
		}
		for j := range ks {
			ks[j] = randVec(rng, dh)
		}
		xp, err := posenc.New("xpos", c.o)
		if err != nil {
			t.Fatal(err)
		}
		ro := c.o
		ro.XPosScaleBase = 0
		rope := newRope(t, "rope", ro)
		rot, _ := rope.RotaryDims(dh)
		pr := rope.Pairing
		gamma := c.o.Defaults().XPosScaleBase
		zeta := posenc.XPosZeta(rot)
		xq, xk := ropeRotate(t, xp, qs, ks, c.qStart, c.kStart)
		rq, rk := ropeRotate(t, rope, qs, ks, c.qStart, c.kStart)
		for i := range qs {
			for j := range ks {
				n, m := c.qStart+i, c.kStart+j
				want := 0.0
				for p := 0; p < rot/2; p++ {
					a, b := pr.Pair(p, rot)
					want += math.Pow(zeta[p], float64(n-m)/gamma) * (rq[i][a]*rk[j][a] + rq[i][b]*rk[j][b])
				}
				for d := rot; d < dh; d++ {
					want += rq[i][d] * rk[j][d]
				}
				if got := dot(xq[i], xk[j]); math.Abs(got-want) > 1e-12*(1+math.Abs(want)) {
					t.Fatalf("%+v: score (%d, %d) %v, want %v", c.o, n, m, got, want)
				}
			}
		}
	}
}

// TestXPosCentre: the scale exponent is taken from ceil(N/2) as
// torchscale's min_pos = -(length+offset)//2.
func TestXPosCentre(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 1, 5: 3, 8: 4, 9: 5} {
		if got := posenc.XPosCentre(n); got != want {
			t.Errorf("XPosCentre(%d) = %d, want %d", n, got, want)
		}
	}
	checkFloats(t, "ζ rot 4", posenc.XPosZeta(4), []float64{0.4 / 1.4, 0.9 / 1.4}, 1e-15)
}

// TestXPosBidirectional: a bidirectional site is an error naming xpos.
func TestXPosBidirectional(t *testing.T) {
	enc, err := posenc.New("xpos", posenc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if co, ok := enc.(posenc.CausalOnly); !ok || !co.CausalOnly() {
		t.Fatal("xpos is not CausalOnly")
	}
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float64, 4, G.WithShape(1, 1, 2, 4), G.WithName("x"), G.WithInit(G.Zeroes()))
	site := &posenc.Site{G: g, Params: graph.NewParams(tensor.Float64, 1), B: 1, H: 1, DHead: 4, DModel: 4, Span: posenc.Span{TQ: 2, TK: 2}}
	if _, _, err := enc.(posenc.QKTransformer).TransformQK(site, x, x); err == nil || !strings.Contains(err.Error(), "xpos") || !strings.Contains(err.Error(), "causal") {
		t.Fatalf("bidirectional xpos: error %v", err)
	}
	site.Causal = true
	if _, _, err := enc.(posenc.QKTransformer).TransformQK(site, x, x); err != nil {
		t.Fatalf("causal xpos: %v", err)
	}
	site.TQ = 3
	if _, _, err := enc.(posenc.QKTransformer).TransformQK(site, x, x); err == nil || !strings.Contains(err.Error(), "q has shape") {
		t.Fatalf("xpos shape error: %v", err)
	}
}
