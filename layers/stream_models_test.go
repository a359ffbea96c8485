package layers_test

import (
	"fmt"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// TestGraphTransformerStream: every configuration of graphCases with
// Encoder.Stream, built for some relations with a Feed and run, then bound
// to other relations and run again (as the graph study does every batch),
// computes the logits and gradients of the materialised attention run the
// same way, to 1e-12 in float64, and every block went through the streaming
// path (no probs). It does so on graphs of the batch's size (no mask) and
// on padded graphs whose padding mask is rebound with the relations (the
// streaming attention reads it at every run: graph.StreamOpts.KeyPad).
func TestGraphTransformerStream(t *testing.T) {
	const n = 4
	first, next := []tgraph{graphA, graphB}, []tgraph{graphB, graphA}
	for _, padded := range []bool{false, true} {
		N := n
		if padded {
			N = n + 2
		}
		var rel []int
		for _, gr := range next {
			rel = append(rel, gr.relations(N)...)
		}
		nextPos, err := posenc.NewPairwise(2, N, N, testMaxDist+2, rel)
		if err != nil {
			t.Fatal(err)
		}
		// the next batch's mask differs from the first's (every graph's
		// n nodes real): node 3 of graph 0 and node 4 of graph 1 too
		nextValid := [][]bool{make([]bool, N), make([]bool, N)}
		for j := 0; j < N; j++ {
			nextValid[0][j], nextValid[1][j] = j < 3, j < 5
		}
		for name, cfg := range graphCases() {
			t.Run(fmt.Sprintf("%s/padded=%v", name, padded), func(t *testing.T) {
				run := func(cfg layers.GraphConfig) ([]float64, [][]float64, *built) {
					bt, err := buildWith(cfg, first, N, 3, padded, posenc.NewFeed())
					if err != nil {
						t.Fatal(err)
					}
					wrt := bt.m.Learnables()
					grads, err := G.Grad(bt.loss, wrt...)
					if err != nil {
						t.Fatal(err)
					}
					vm := G.NewTapeMachine(bt.g)
					defer vm.Close()
					if err := vm.RunAll(); err != nil {
						t.Fatal(err)
					}
					vm.Reset()
					sp, err := bt.m.SitePositions(nextPos)
					if err != nil {
						t.Fatal(err)
					}
					if err := bt.pos.Feed.Bind(sp); err != nil {
						t.Fatal(err)
					}
					if padded {
						mv, err := bt.m.MaskValue(nextValid)
						if err != nil {
							t.Fatal(err)
						}
						if err := G.Let(bt.mask, mv); err != nil {
							t.Fatal(err)
						}
					}
					if err := vm.RunAll(); err != nil {
						t.Fatal(err)
					}
					out := make([][]float64, len(grads))
					for i, g := range grads {
						out[i] = graph.ToFloat64s(g.Value())
					}
					return graph.ToFloat64s(bt.logits.Value()), out, bt
				}
				ref, refGrads, _ := run(cfg)
				cfg.Encoder.Stream = true
				got, gotGrads, bt := run(cfg)
				for _, blk := range bt.m.Blocks {
					if !blk.Attn.Cfg.Stream || blk.Attn.Probs() != nil {
						t.Fatalf("%s: did not stream", blk.Name)
					}
				}
				assertClose(t, got, ref, 1e-12)
				for i := range refGrads {
					assertClose(t, gotGrads[i], refGrads[i], 1e-12)
				}
			})
		}
	}
}

// TestViTStream: the ViT with Encoder.Stream streams every block (no
// probs) for a 2-D bias, a 2-D rotation and a 1-D bias on the raster
// order, and its logits equal the materialised model's to 1e-12 (the
// posenc harness checks the gradients of every grid encoding).
func TestViTStream(t *testing.T) {
	for _, pos := range []string{"swin-log", "alibi-2d", "rope-2d", "t5"} {
		t.Run(pos, func(t *testing.T) {
			run := func(stream bool) ([]float64, *layers.ViT) {
				g := G.NewGraph()
				p := graph.NewParams(tensor.Float64, 1)
				cfg := tinyViT(pos)
				cfg.Encoder.Stream = stream
				m, err := layers.NewViT(g, p, cfg)
				if err != nil {
					t.Fatal(err)
				}
				const rows, cols = 2, 3
				x := make([]float64, 2*rows*cols*cfg.PatchDim())
				for i := range x {
					x[i] = float64(i%7)*0.3 - 0.9
				}
				in := G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, rows*cols, cfg.PatchDim()), G.WithName("patches"),
					G.WithValue(graph.FromFloat64s(tensor.Float64, tensor.Shape{2, rows * cols, cfg.PatchDim()}, x)))
				logits, err := m.Fwd(in, rows, cols)
				if err != nil {
					t.Fatal(err)
				}
				vm := G.NewTapeMachine(g)
				defer vm.Close()
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				return graph.ToFloat64s(logits.Value()), m
			}
			ref, _ := run(false)
			got, m := run(true)
			for _, blk := range m.Blocks {
				if !blk.Attn.Cfg.Stream || blk.Attn.Probs() != nil {
					t.Fatalf("%s: did not stream", blk.Name)
				}
			}
			assertClose(t, got, ref, 1e-12)
		})
	}
}
