package codestudy

import (
	"math"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/gocode"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// constNats is the summed next-byte cross-entropy (nats) of a graph built
// for ids and targets [b, l] with the relations rel [b, l, l] as constants
// (positions without a Feed), the reference for the fed graphs.
func constNats(t *testing.T, p *graph.Params, model layers.Config, b, l, numRel int, ids, tgts, rel []int) float64 {
	t.Helper()
	g := G.NewGraph()
	defer p.Forget(g)
	lm, err := layers.NewLM(g, p, model)
	if err != nil {
		t.Fatal(err)
	}
	pos, err := posenc.NewPairwise(b, l, l, numRel, rel)
	if err != nil {
		t.Fatal(err)
	}
	idsN := G.NewMatrix(g, tensor.Int, G.WithShape(b, l), G.WithName("ref_ids"),
		G.WithValue(tensor.New(tensor.WithShape(b, l), tensor.WithBacking(append([]int(nil), ids...)))))
	logits, err := lm.FwdWith(idsN, layers.Options{Pos: pos})
	if err != nil {
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	var nats float64
	buf := make([]float64, 256)
	for i, y := range tgts {
		nats -= trainer.LogSoftmaxAt(rowFloat64(logits.Value(), i, 256, buf), y)
	}
	return nats
}

// TestFeedMatchesConstant: the training graph, built once, computes for
// the second and third batches (relations rebound through the Feed) the
// loss of a graph built with those relations as constants; Evaluate, whose
// graph also rebinds relations per batch, agrees with the same reference
// window by window. So the relations of every batch reach the model.
func TestFeedMatchesConstant(t *testing.T) {
	src := writeSrc(t)
	p := tinyPlan("tree+rope")
	p.Base.Dtype = tensor.Float64
	p.Base.Model.InitStd, p.Base.Model.PosOpts.InitStd = 0.3, 1 // a visible tree bias
	r, _, cfg, task := firstTask(t, p, src, t.TempDir())
	if !task.Pairwise() {
		t.Fatal("tree+rope is not given relations")
	}
	params := graph.NewParams(tensor.Float64, 1)
	g := G.NewGraph()
	loss, _, err := task.Build(g, params)
	if err != nil {
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	b, l, numRel := cfg.Batch, cfg.SeqLen, gocode.NumTreeRelations(4, 4)
	var prev []int
	for step := 0; step < 3; step++ {
		if err := task.Next(); err != nil {
			t.Fatal(err)
		}
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		got := graph.ToFloat64s(loss.Value())[0]
		vm.Reset()
		if step == 0 {
			prev = append([]int(nil), task.rel...)
			continue
		}
		want := constNats(t, params, cfg.Model, b, l, numRel, task.ids, task.tgts, task.rel) / float64(b*l)
		if math.Abs(got-want) > 1e-12 {
			t.Fatalf("step %d: fed loss %.15f, constant relations %.15f", step, got, want)
		}
		same := true
		for i := range prev {
			same = same && prev[i] == task.rel[i]
		}
		if same {
			t.Fatal("two batches with the same relations: the test cannot see a stale binding")
		}
	}
	// Evaluate: 3 windows in batches of 2 (a padded last batch).
	anchors := r.test[:3]
	spec := task.EvalSpec(2 * l)
	spec.Batch = 2
	res, err := Evaluate(params, anchors, spec)
	if err != nil {
		t.Fatal(err)
	}
	var want float64
	le := spec.Length
	ids, tgts, rel := make([]int, le), make([]int, le), make([]int, le*le)
	for _, a := range anchors {
		if err := gocode.Window(a.File, a.End-le, le, 4, 4, ids, tgts, rel); err != nil {
			t.Fatal(err)
		}
		want += constNats(t, params, cfg.Model, 1, le, numRel, ids, tgts, rel)
	}
	want /= float64(3*le) * math.Ln2
	if math.Abs(res.BitsPerByte-want) > 1e-12 {
		t.Fatalf("Evaluate: %.15f bits/byte, constant relations %.15f", res.BitsPerByte, want)
	}
}
