package codestudy

import (
	"strings"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/gocode"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/experiments/viz"
	"github.com/rpe-go/rpe/graph"
)

// LoadModel returns the weights of job j of plan p from its checkpoint in
// the output directory, the job's training configuration and the corpus
// (for TreeBias and for drawing a snippet's relations with gocode). It
// returns an error if the job has not been trained.
func LoadModel(p Plan, opt Options, j Job) (*graph.Params, trainer.Config, *gocode.Corpus, error) {
	r, err := newRunner(p, opt)
	if err != nil {
		return nil, trainer.Config{}, nil, err
	}
	cfg, err := p.Config(j)
	if err != nil {
		return nil, trainer.Config{}, nil, err
	}
	task, err := NewTask(cfg, Data{Corpus: r.corpus, Val: r.val})
	if err != nil {
		return nil, trainer.Config{}, nil, err
	}
	js, _, err := r.jobs()
	if err != nil {
		return nil, trainer.Config{}, nil, err
	}
	ckpt, err := js.CkptOf(j.Key())
	if err != nil {
		return nil, trainer.Config{}, nil, err
	}
	params, _, err := trainer.LoadTaskModel(ckpt, task)
	if err != nil {
		return nil, trainer.Config{}, nil, err
	}
	return params, task.cfg, r.corpus, nil
}

// TreeBias returns the learned tree bias of block layer of a model whose
// encoding has a tree part ("tree", "tree+rope"): per head a matrix
// [MaxUp+1, MaxDown+1] whose entry (u, d) is the bias the head adds to the
// score of a key u steps up and d steps down the syntax tree from the
// query (scaled by the learned alpha if the model has one). It returns an
// error if the model has no tree bias for that block.
func TreeBias(p *graph.Params, cfg trainer.Config, layer int) ([]viz.Matrix, error) {
	var names []string
	for _, n := range p.Names() {
		if n == "tree_bias" || strings.HasSuffix(n, "/tree_bias") {
			names = append(names, n)
		}
	}
	if layer < 0 || layer >= len(names) {
		return nil, errors.Errorf("tree bias: block %d has none (the model has %d tree bias tables)", layer, len(names))
	}
	up, down := treeBounds(cfg.Model.PosOpts)
	name := names[layer]
	vals := p.Float64s(name)
	h := cfg.Model.Heads
	rows := (up + 1) * (down + 1)
	if len(vals) != rows*h {
		return nil, errors.Errorf("tree bias: %s has %d values, want %d relations x %d heads", name, len(vals), rows, h)
	}
	alpha := 1.0
	if a := p.Float64s(strings.TrimSuffix(name, "tree_bias") + "tree_alpha"); len(a) == 1 {
		alpha = a[0]
	}
	out := make([]viz.Matrix, h)
	for hh := range out {
		m := make([]float64, rows)
		for r := range m {
			m[r] = alpha * vals[r*h+hh] // relation id r = u*(down+1) + d
		}
		var err error
		if out[hh], err = viz.NewMatrix(up+1, down+1, m); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SnippetRelations parses src (a whole Go file) and returns the tree
// relations of its n bytes from start as two n×n matrices, the steps up
// and the steps down from query byte i (row) to key byte j (column)
// through their lowest common ancestor, clipped at maxUp and maxDown (the
// relation a tree encoding sees), for viz.HeatmapGrid. It returns the
// parser's error if src does not parse, or gocode.Relations' error for a
// window outside src or negative bounds.
func SnippetRelations(src []byte, start, n, maxUp, maxDown int) (up, down viz.Matrix, err error) {
	f, err := gocode.ParseFile("snippet.go", src, false)
	if err != nil {
		return viz.Matrix{}, viz.Matrix{}, err
	}
	rel := make([]int, n*n)
	if err := gocode.Relations(&f.Tree, f.ByteNode, start, n, maxUp, maxDown, rel); err != nil {
		return viz.Matrix{}, viz.Matrix{}, err
	}
	u, d := make([]float64, n*n), make([]float64, n*n)
	for i, r := range rel {
		a, b := gocode.UpDown(r, maxDown)
		u[i], d[i] = float64(a), float64(b)
	}
	if up, err = viz.NewMatrix(n, n, u); err != nil {
		return viz.Matrix{}, viz.Matrix{}, err
	}
	down, err = viz.NewMatrix(n, n, d)
	return up, down, err
}
