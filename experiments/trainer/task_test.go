package trainer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pkgerrors "github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// blobsConfig is the toy task's own configuration (TaskConfigurer).
type blobsConfig struct {
	Dim int     // input dimension
	Sep float64 // the classes are centred at ±Sep on every axis
}

// blobsTask is a toy Task: two Gaussian blobs in Dim dimensions, classified
// by one linear layer (x [B, Dim] -> logits [B, 2] -> mean cross-entropy).
// Batches come from a seeded PCG generator (its state is checkpointed);
// the validation set is fixed by dataSeed; validation is the accuracy.
type blobsTask struct {
	batch    int
	tc       blobsConfig
	dataSeed uint64

	pcg    *rand.PCG
	rng    *rand.Rand
	lin    *layers.Linear
	p      *graph.Params
	xN, yN *G.Node
	labels []int
}

func newBlobs(cfg Config, tc blobsConfig, dataSeed uint64) *blobsTask {
	pcg := rand.NewPCG(uint64(cfg.Seed), 7)
	return &blobsTask{batch: cfg.Batch, tc: tc, dataSeed: dataSeed, pcg: pcg, rng: rand.New(pcg)}
}

// blobsEngineConfig is an engine Config without a vocabulary or a sequence
// length: only the optimizer, schedule, batch, steps, seed and dtype matter.
func blobsEngineConfig() Config {
	c := tinyConfig()
	c.Model.Vocab, c.SeqLen = 0, 0
	c.Batch, c.Steps, c.Warmup, c.LR = 8, 8, 2, 0.05
	return c
}

// draw fills n points and labels from rng.
func (b *blobsTask) draw(rng *rand.Rand, n int) ([]float64, []int) {
	x, y := make([]float64, n*b.tc.Dim), make([]int, n)
	for i := range y {
		y[i] = rng.IntN(2)
		c := b.tc.Sep * float64(2*y[i]-1)
		for j := 0; j < b.tc.Dim; j++ {
			x[i*b.tc.Dim+j] = c + rng.NormFloat64()
		}
	}
	return x, y
}

func (b *blobsTask) Kind() string { return "blobs" }

func (b *blobsTask) forward(g *G.ExprGraph, p *graph.Params, n int) (*layers.Linear, *G.Node, *G.Node, error) {
	lin, err := layers.NewLinear(g, p, layers.LinearConfig{Name: "cls", In: b.tc.Dim, Out: 2, Bias: true, InitStd: 0.1})
	if err != nil {
		return nil, nil, nil, err
	}
	x := G.NewMatrix(g, p.Dtype(), G.WithShape(n, b.tc.Dim), G.WithName("blobs_x"))
	logits, err := lin.Fwd(x)
	return lin, x, logits, err
}

func (b *blobsTask) Build(g *G.ExprGraph, p *graph.Params) (*G.Node, G.Nodes, error) {
	lin, x, logits, err := b.forward(g, p, b.batch)
	if err != nil {
		return nil, nil, err
	}
	b.lin, b.p, b.xN = lin, p, x
	b.yN = G.NewVector(g, tensor.Int, G.WithShape(b.batch), G.WithName("blobs_y"))
	loss, err := graph.CrossEntropy(logits, b.yN)
	return loss, lin.Learnables(), err
}

func (b *blobsTask) Next() error {
	x, y := b.draw(b.rng, b.batch)
	if err := G.Let(b.xN, graph.FromFloat64s(b.p.Dtype(), tensor.Shape{b.batch, b.tc.Dim}, x)); err != nil {
		return err
	}
	return G.Let(b.yN, tensor.New(tensor.WithShape(b.batch), tensor.WithBacking(y)))
}

func (b *blobsTask) Items() int                  { return b.batch }
func (b *blobsTask) State() ([]byte, error)      { return b.pcg.MarshalBinary() }
func (b *blobsTask) SetState(s []byte) error     { return b.pcg.UnmarshalBinary(s) }
func (b *blobsTask) DataHash() string            { return fmt.Sprintf("blobs-seed-%d", b.dataSeed) }
func (b *blobsTask) Describe() string            { return fmt.Sprintf("blobs %+v: linear classifier", b.tc) }
func (b *blobsTask) TaskConfig() ([]byte, error) { return json.Marshal(b.tc) }

func (b *blobsTask) CheckTaskConfig(saved []byte) error {
	var s blobsConfig
	if err := json.Unmarshal(saved, &s); err != nil {
		return pkgerrors.Wrap(err, "blobs config")
	}
	if s != b.tc {
		return pkgerrors.Errorf("blobs: checkpoint has %+v, this run %+v", s, b.tc)
	}
	return nil
}

// Validate is the accuracy on 64 points drawn from dataSeed.
func (b *blobsTask) Validate(p *graph.Params) (Validation, error) {
	const n = 64
	x, y := b.draw(rand.New(rand.NewPCG(b.dataSeed, 1)), n)
	g := G.NewGraph()
	defer p.Forget(g)
	_, xN, logits, err := b.forward(g, p, n)
	if err != nil {
		return Validation{}, err
	}
	if err := G.Let(xN, graph.FromFloat64s(p.Dtype(), tensor.Shape{n, b.tc.Dim}, x)); err != nil {
		return Validation{}, err
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		return Validation{}, err
	}
	l := graph.ToFloat64s(logits.Value().(tensor.Tensor))
	right := 0
	for i := range y {
		if (l[2*i+1] > l[2*i]) == (y[i] == 1) {
			right++
		}
	}
	acc := float64(right) / n
	return Validation{Name: "accuracy", Value: acc, Text: fmt.Sprintf("validation: accuracy %.4f over %d points", acc, n)}, nil
}

// TestRunTask trains the toy task through the engine: the loss falls and
// the accuracy is high; an interrupted (BeforeStep error) and resumed run
// reproduces the uninterrupted one bit for bit (losses, metrics, final
// weights); the checkpoint is format v3 with the task's kind and config.
func TestRunTask(t *testing.T) {
	cfg := blobsEngineConfig()
	tc := blobsConfig{Dim: 3, Sep: 1.5}
	dir := t.TempDir()
	var log bytes.Buffer
	full, err := RunTask(context.Background(), cfg, newBlobs(cfg, tc, 5), RunOptions{Ckpt: filepath.Join(dir, "a", "ck"), Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	n := len(full.Losses)
	if n != cfg.Steps || !(full.Losses[n-1] < full.Losses[0]) || full.Val.Name != "accuracy" || !(full.Val.Value >= 0.9) {
		t.Fatalf("losses %v, validation %+v", full.Losses, full.Val)
	}
	for _, s := range []string{"blobs {Dim:3 Sep:1.5}", "validation: accuracy ", "over 64 points"} {
		if !strings.Contains(log.String(), s) {
			t.Errorf("log lacks %q:\n%s", s, log.String())
		}
	}
	if !strings.Contains(full.String(), "val "+fmt.Sprintf("%.4f", full.Val.Value)+" accuracy") ||
		!strings.Contains(full.String(), "train loss") || !strings.Contains(full.String(), " bits (last update)") ||
		!strings.Contains(full.String(), "items/s") {
		t.Errorf("summary %q", full)
	}
	ck, err := LoadCheckpoint(filepath.Join(dir, "a", "ck"))
	if err != nil {
		t.Fatal(err)
	}
	if ck.Format != checkpointFormatV3 || ck.Task != "blobs" || string(ck.TaskConfig) != `{"Dim":3,"Sep":1.5}` ||
		ck.CorpusHash != "blobs-seed-5" || ck.Config.Model.Vocab != 0 {
		t.Errorf("checkpoint format %q task %q config %q hash %q vocab %d", ck.Format, ck.Task, ck.TaskConfig, ck.CorpusHash, ck.Config.Model.Vocab)
	}

	// LoadTaskModel: the weights of the checkpoint, for evaluation; another
	// task config or kind is refused.
	p, ck2, err := LoadTaskModel(filepath.Join(dir, "a", "ck"), newBlobs(cfg, tc, 99))
	if err != nil {
		t.Fatal(err)
	}
	if ck2.Step != cfg.Steps {
		t.Errorf("LoadTaskModel: step %d", ck2.Step)
	}
	for name, w := range ck.Params {
		for i, x := range p.Float64s(name) {
			if x != w.Data[i] {
				t.Fatalf("LoadTaskModel: %s[%d] = %v, checkpoint %v", name, i, x, w.Data[i])
			}
		}
	}
	if v, err := newBlobs(cfg, tc, 5).Validate(p); err != nil || v.Value != full.Val.Value {
		t.Errorf("LoadTaskModel: validation %v (%v), run's %v", v.Value, err, full.Val.Value)
	}
	_, _, err = LoadTaskModel(filepath.Join(dir, "a", "ck"), newBlobs(cfg, blobsConfig{Dim: 3, Sep: 2}, 5))
	wantErr(t, err, "checkpoint of another blobs configuration")
	lmPath := filepath.Join(dir, "lm")
	if err := newTiny(t, tinyConfig()).Save(lmPath); err != nil {
		t.Fatal(err)
	}
	_, _, err = LoadTaskModel(lmPath, newBlobs(cfg, tc, 5))
	wantErr(t, err, "lm", `checkpoint is of task "lm"; this run trains "blobs"`)

	// Interrupted before update 3 (saving), then resumed.
	path := filepath.Join(dir, "b", "ck")
	stop := errors.New("stop")
	opt := RunOptions{Ckpt: path, NoEval: true, BeforeStep: func(s int) error {
		if s == 3 {
			return stop
		}
		return nil
	}}
	s1, err := RunTask(context.Background(), cfg, newBlobs(cfg, tc, 5), opt)
	if !errors.Is(err, ErrInterrupted) || !errors.Is(err, stop) {
		t.Fatalf("error %v does not wrap ErrInterrupted", err)
	}
	opt.BeforeStep, opt.NoEval = nil, false
	s2, err := RunTask(context.Background(), cfg, newBlobs(cfg, tc, 5), opt)
	if err != nil {
		t.Fatal(err)
	}
	got := append(append([]float64(nil), s1.Losses...), s2.Losses...)
	if s2.StartStep != 3 || len(got) != n {
		t.Fatalf("resumed at %d, %d losses", s2.StartStep, len(got))
	}
	for i := range got {
		if got[i] != full.Losses[i] {
			t.Fatalf("interrupted losses %v, uninterrupted %v", got, full.Losses)
		}
	}
	if s2.Val.Value != full.Val.Value {
		t.Errorf("validation %v, uninterrupted %v", s2.Val.Value, full.Val.Value)
	}
	a, _ := LoadCheckpoint(filepath.Join(dir, "a", "ck"))
	b, err := LoadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range a.Params {
		for i, x := range w.Data {
			if b.Params[name].Data[i] != x {
				t.Fatalf("weight %s[%d]: resumed %v, uninterrupted %v", name, i, b.Params[name].Data[i], x)
			}
		}
	}
	ma, err1 := ReadMetrics(MetricsPath(filepath.Join(dir, "a", "ck")))
	mb, err2 := ReadMetrics(MetricsPath(path))
	if err1 != nil || err2 != nil || len(ma) != n || len(mb) != n {
		t.Fatalf("metrics: %v %v, %d and %d lines", err1, err2, len(ma), len(mb))
	}
	for i := range ma {
		if ma[i].LossBPB != mb[i].LossBPB || ma[i].GradNorm != mb[i].GradNorm || ma[i].LR != mb[i].LR {
			t.Errorf("metrics line %d: %+v vs %+v", i, ma[i], mb[i])
		}
	}
	if last := mb[n-1]; last.Val == nil || *last.Val != full.Val.Value || last.ValName != "accuracy" || last.ValBPB != nil {
		t.Errorf("last metrics line %+v", last)
	}
}

// TestRunTaskRefuses: a checkpoint of another task configuration, other
// data or another task kind is refused naming the difference; an edited
// task or task configuration fails the checksum; a sample needs the LM.
func TestRunTaskRefuses(t *testing.T) {
	cfg := blobsEngineConfig()
	cfg.Steps = 2
	tc := blobsConfig{Dim: 2, Sep: 1}
	path := filepath.Join(t.TempDir(), "ck")
	if _, err := RunTask(context.Background(), cfg, newBlobs(cfg, tc, 1), RunOptions{Ckpt: path, NoEval: true}); err != nil {
		t.Fatal(err)
	}
	cfg.Steps = 4
	run := func(task Task, c Config) error {
		_, err := RunTask(context.Background(), c, task, RunOptions{Ckpt: path, NoEval: true})
		return err
	}
	wantErr(t, run(newBlobs(cfg, blobsConfig{Dim: 2, Sep: 2}, 1), cfg),
		"checkpoint of another blobs configuration", "checkpoint has {Dim:2 Sep:1}, this run {Dim:2 Sep:2}", "-fresh")
	wantErr(t, run(newBlobs(cfg, tc, 9), cfg), "trained on data with hash blobs-seed-1; this run's data has hash blobs-seed-9")
	lm, err := NewLMTask(tinyConfig(), tinyCorpus(t))
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, run(lm, tinyConfig()), `checkpoint is of task "blobs"; this run trains "lm"`)
	// An LM checkpoint is of task "lm" for the toy task.
	lmPath := filepath.Join(t.TempDir(), "lm")
	if err := newTiny(t, tinyConfig()).Save(lmPath); err != nil {
		t.Fatal(err)
	}
	_, err = RunTask(context.Background(), cfg, newBlobs(cfg, tc, 1), RunOptions{Resume: lmPath})
	wantErr(t, err, `checkpoint is of task "lm"; this run trains "blobs"`)
	if err := run(newBlobs(cfg, tc, 1), cfg); err != nil {
		t.Errorf("same task config: %v", err)
	}

	good, _ := os.ReadFile(path)
	for _, edit := range [][2]string{{`"task":"blobs"`, `"task":"blobz"`}, {`"task_config":"7b`, `"task_config":"7c`}} {
		if !bytes.Contains(good, []byte(edit[0])) {
			t.Fatalf("no %s in the header", edit[0])
		}
		bad := filepath.Join(t.TempDir(), "bad")
		os.WriteFile(bad, bytes.Replace(good, []byte(edit[0]), []byte(edit[1]), 1), 0o644)
		_, err := LoadCheckpoint(bad)
		wantErr(t, err, "corrupt or truncated", "checksum")
	}

	_, err = RunTask(context.Background(), cfg, newBlobs(cfg, tc, 1), RunOptions{SampleLen: 5})
	wantErr(t, err, `task "blobs" cannot generate samples`)
}

// brokenTask returns what its build function returns.
type brokenTask struct {
	*blobsTask
	build func(g *G.ExprGraph, p *graph.Params) (*G.Node, G.Nodes, error)
}

func (b brokenTask) Build(g *G.ExprGraph, p *graph.Params) (*G.Node, G.Nodes, error) {
	return b.build(g, p)
}

// TestNewTaskTrainerChecks: what Build returns is checked, with errors, not
// panics; the engine's config needs no vocabulary or sequence length, the
// LM's does.
func TestNewTaskTrainerChecks(t *testing.T) {
	cfg := blobsEngineConfig()
	if err := cfg.ValidateTraining(); err != nil {
		t.Errorf("ValidateTraining: %v", err)
	}
	wantErr(t, cfg.Validate(), "vocab 0")
	lmCfg := cfg
	lmCfg.Model.Vocab = Vocab
	wantErr(t, lmCfg.Validate(), "seq len is 0")
	bad := cfg
	bad.Batch = 0
	wantErr(t, bad.ValidateTraining(), "batch is 0")
	_, err := NewTaskTrainer(bad, newBlobs(cfg, blobsConfig{Dim: 2, Sep: 1}, 1))
	wantErr(t, err, "batch is 0")
	_, err = NewTaskTrainer(cfg, nil)
	wantErr(t, err, "nil task")

	type built = func(g *G.ExprGraph, p *graph.Params) (*G.Node, G.Nodes, error)
	param := func(g *G.ExprGraph, p *graph.Params, name string) *G.Node {
		n, err := p.Node(g, name, tensor.Shape{2}, graph.Zeros, false)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	sum := func(n *G.Node) *G.Node { s, _ := G.Sum(n); return s }
	cases := []struct {
		name  string
		build built
		want  string
	}{
		{"error", func(*G.ExprGraph, *graph.Params) (*G.Node, G.Nodes, error) { return nil, nil, errors.New("no model") }, "no model"},
		{"nil loss", func(g *G.ExprGraph, p *graph.Params) (*G.Node, G.Nodes, error) {
			return nil, G.Nodes{param(g, p, "a")}, nil
		}, "nil loss"},
		{"vector loss", func(g *G.ExprGraph, p *graph.Params) (*G.Node, G.Nodes, error) {
			a := param(g, p, "a")
			return a, G.Nodes{a}, nil
		}, "the loss has shape (2), want a scalar"},
		{"other graph", func(g *G.ExprGraph, p *graph.Params) (*G.Node, G.Nodes, error) {
			a := param(g, p, "a")
			return sum(param(G.NewGraph(), p, "a")), G.Nodes{a}, nil
		}, "not a node of the training graph"},
		{"dtype", func(g *G.ExprGraph, p *graph.Params) (*G.Node, G.Nodes, error) {
			a := param(g, p, "a")
			return G.NewScalar(g, tensor.Float32, G.WithName("l")), G.Nodes{a}, nil
		}, "want float64"},
		{"missing learnable", func(g *G.ExprGraph, p *graph.Params) (*G.Node, G.Nodes, error) {
			a, b := param(g, p, "a"), param(g, p, "b")
			s, _ := G.Add(sum(a), sum(b))
			return s, G.Nodes{a}, nil
		}, "1 learnable nodes but 2 parameters"},
		{"twice", func(g *G.ExprGraph, p *graph.Params) (*G.Node, G.Nodes, error) {
			a := param(g, p, "a")
			return sum(a), G.Nodes{a, a}, nil
		}, `learnable node "a" is listed twice`},
		{"not a parameter", func(g *G.ExprGraph, p *graph.Params) (*G.Node, G.Nodes, error) {
			x := G.NewVector(g, tensor.Float64, G.WithShape(2), G.WithName("x"))
			return sum(x), G.Nodes{x}, nil
		}, `learnable node "x" is not a parameter`},
	}
	for _, c := range cases {
		_, err := NewTaskTrainer(cfg, brokenTask{newBlobs(cfg, blobsConfig{Dim: 2, Sep: 1}, 1), c.build})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

// TestBatchCounter: the state round-trips as {"step": n}; a corrupt one is
// refused and leaves the counter as it was.
func TestBatchCounter(t *testing.T) {
	c := BatchCounter{Step: 41}
	b, err := c.State()
	if err != nil || string(b) != `{"step":41}` {
		t.Fatalf("State: %s, %v", b, err)
	}
	var d BatchCounter
	if err := d.SetState(b); err != nil || d.Step != 41 {
		t.Fatalf("SetState: %+v, %v", d, err)
	}
	if err := d.SetState([]byte("not json")); err == nil || !strings.Contains(err.Error(), "corrupt batch state") || d.Step != 41 {
		t.Errorf("corrupt state: %v, step %d", err, d.Step)
	}
}
