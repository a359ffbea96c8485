package graph

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestStreamAttentionKeyPad checks StreamOpts.KeyPad, the key mask read at
// every run: one graph, run on two masks in turn (G.Let between runs, as a
// padding mask bound per batch), gives bit for bit the output and the
// gradients of q, k, v and the table of a graph built with each mask as a
// KeyMask (itself checked against the materialised path); a [1, Tk] pad
// serves every batch element. Reading the mask only when the graph is
// built would fail the second run.
func TestStreamAttentionKeyPad(t *testing.T) {
	base := streamCase{b: 3, h: 2, tq: 6, tk: 6, dh: 2, dv: 2, causal: true, tileQ: 3, tileK: 2, table: "example"}
	masks := []func(b, j int) bool{
		func(b, j int) bool { return b != 1 && !(b == 2 && j >= 4) && !(b == 0 && j == 0) },
		func(b, j int) bool { return j%3 != 1 && !(b == 1 && j >= 3) },
	}
	for _, shared := range []bool{false, true} {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			name := fmt.Sprintf("shared=%v/%v", shared, dt)
			pad := func(m func(b, j int) bool) func(b, j int) bool {
				if shared {
					return func(_, j int) bool { return m(0, j) }
				}
				return m
			}
			padValue := func(m func(b, j int) bool) *tensor.Dense {
				rows := base.b
				if shared {
					rows = 1
				}
				x := make([]float64, rows*base.tk)
				for b := 0; b < rows; b++ {
					for j := 0; j < base.tk; j++ {
						if pad(m)(b, j) {
							x[b*base.tk+j] = 1 + float64(j) // any non-zero value is a real key
						}
					}
				}
				return fromFloat64(dt, tensor.Shape{rows, base.tk}, x)
			}

			// one graph with a KeyPad input, run on both masks
			g := G.NewGraph()
			d := base.data(1)
			q, k, v, tab, wrt := base.inputs(g, dt, d)
			kp := input(g, "keypad", padValue(masks[0]))
			out, err := StreamAttention(q, k, v, StreamOpts{Heads: base.h, Causal: true, KeyPad: kp, Table: tab, Index: d.index, TileQ: base.tileQ, TileK: base.tileK})
			if err != nil {
				t.Fatal(err)
			}
			loss := projLoss(t, rand.New(rand.NewSource(2)), out, "w")
			grads, err := G.Grad(loss, wrt...)
			if err != nil {
				t.Fatal(err)
			}
			m := G.NewTapeMachine(g)
			for i, mk := range masks {
				if i > 0 {
					if err := G.Let(kp, padValue(mk)); err != nil {
						t.Fatal(err)
					}
				}
				if err := m.RunAll(); err != nil {
					t.Fatal(err)
				}
				got := [][]float64{ToFloat64s(out.Value())}
				for _, gr := range grads {
					got = append(got, ToFloat64s(gr.Value()))
				}
				m.Reset()

				c := base
				c.pad = pad(mk)
				want := streamRun(t, c, dt, false)
				for x := range want {
					if p, ok := sameBits(got[x], want[x]); !ok {
						t.Fatalf("%s, mask %d: %s[%d] = %v, with a KeyMask %v", name, i, streamWhat[x], p, got[x][p], want[x][p])
					}
				}
			}
			m.Close()
		}
	}
}

// TestStreamAttentionKeyPadErrors checks the KeyPad's refusals.
func TestStreamAttentionKeyPadErrors(t *testing.T) {
	g := G.NewGraph()
	rng := rand.New(rand.NewSource(1))
	q := input(g, "q", randDense(rng, tensor.Float64, 1, 2, 5, 4))
	k := input(g, "k", randDense(rng, tensor.Float64, 1, 2, 5, 4))
	emb := input(g, "emb", randDense(rng, tensor.Float64, 1, 2, 3))
	for _, c := range []struct {
		name string
		o    StreamOpts
		want string
	}{
		{"both", StreamOpts{Heads: 2, KeyMask: make([]bool, 10), KeyPad: input(g, "p1", randDense(rng, tensor.Float64, 1, 2, 5))}, "give one"},
		{"shape", StreamOpts{Heads: 2, KeyPad: input(g, "p2", randDense(rng, tensor.Float64, 1, 2, 4))}, "must be [B, Tk] = [2, 5] or [1, 5]"},
		{"rank", StreamOpts{Heads: 2, KeyPad: input(g, "p3", randDense(rng, tensor.Float64, 1, 10))}, "must be [B, Tk]"},
		{"dtype", StreamOpts{Heads: 2, KeyPad: input(g, "p4", randDense(rng, tensor.Float32, 1, 2, 5))}, "of q's dtype float64"},
	} {
		_, err := StreamAttention(q, k, k, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	_, err := StreamCoPE(q, k, k, emb, StreamOpts{Heads: 2, Causal: true, KeyPad: input(g, "p5", randDense(rng, tensor.Float64, 1, 1, 5))}, CoPEOpts{})
	if err == nil || !strings.Contains(err.Error(), "takes a KeyMask known when the graph is built only") {
		t.Errorf("StreamCoPE with a KeyPad: error %v", err)
	}
}
