package timestudy

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
)

// tinyPlan is a plan of tiny models: T = 12 events, tested at 12 and 24.
func tinyPlan(encs ...string) Plan {
	p, _ := Preset("quick")
	p.Preset, p.Encodings, p.Seeds = "test", encs, []int64{1}
	p.Base.Model.DModel, p.Base.Model.Heads, p.Base.Model.Layers, p.Base.Model.FFN = 8, 2, 1, 16
	p.Base.Steps, p.Base.Batch, p.Base.SeqLen, p.Base.Warmup, p.Base.EvalBatch = 6, 4, 12, 2, 4
	p.ValSeqs, p.TestSeqs = 4, 6
	return p
}

// firstTask returns the runner of plan p (output directory dir), its jobs,
// and the task and configuration of the first.
func firstTask(t *testing.T, p Plan, dir string) (*runner, []Job, *Task, trainer.Config) {
	t.Helper()
	r, err := newRunner(p, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ := p.Jobs()
	task, cfg, err := r.newTask(jobs[0])
	if err != nil {
		t.Fatal(err)
	}
	return r, jobs, task, cfg
}

// timeEncodings are the tests' time entries: rope@time if rope serves
// real positions (posenc decides), none otherwise.
func timeEncodings() []string {
	if RealServed("rope", tinyPlan().Base.Model.PosOpts) == nil {
		return []string{"rope@time"}
	}
	return nil
}

// TestRunResumes runs a tiny study (an index model and, where posenc
// serves them, a time model), checks its outputs (rows, CSV read back,
// JSON, table, plot), runs it again (every model reused), renders from
// the saved rows alone, then interrupts a second study mid-training and
// checks that running it again resumes and gives the rows of the
// uninterrupted run bit for bit.
func TestRunResumes(t *testing.T) {
	encs := append([]string{"rope"}, timeEncodings()...)
	p := tinyPlan(encs...)
	dir := t.TempDir()
	var log strings.Builder
	o, err := Run(context.Background(), p, Options{Dir: dir, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	n := len(encs)
	if o.Trained != n || o.Reused != 0 || len(o.Rows) != 2*n {
		t.Fatalf("trained %d, reused %d, %d rows; want %d, 0, %d", o.Trained, o.Reused, len(o.Rows), n, 2*n)
	}
	for i, r := range o.Rows {
		want := []int{12, 24}[i%2]
		if r.Status != StatusOK || r.EvalLen != want || r.Sequences != 6 || r.Events != 6*want || r.Repeats == 0 ||
			r.TrainSteps != 6 || !(r.Bits > 0) || !(r.RepeatBits > 0) || r.Encoding != encs[i/2] {
			t.Fatalf("row %d: %+v", i, r)
		}
		if (r.Positions == "time") != strings.HasSuffix(r.Encoding, "@time") || r.Base != "rope" {
			t.Fatalf("row %d: positions %s, base %s of %s", i, r.Positions, r.Base, r.Encoding)
		}
	}
	table, err := os.ReadFile(filepath.Join(dir, FileTable))
	if err != nil || !strings.Contains(string(table), "| rope |") || !strings.Contains(string(table), "Accuracy on repeated events") {
		t.Errorf("table.md (%v):\n%s", err, table)
	}
	f, err := LoadResults(dir)
	if err != nil || len(f.Rows) != 2*n || f.Plan.Seqs != p.Seqs {
		t.Fatalf("results.json: %+v, %v", f, err)
	}
	csvRows, err := ReadCSV(filepath.Join(dir, FileCSV))
	if err != nil || len(csvRows) != len(o.Rows) {
		t.Fatalf("csv: %d rows, %v", len(csvRows), err)
	}
	for i := range csvRows {
		// results.csv has no per-sequence counts; they add up to the accuracy
		want := o.Rows[i]
		right := 0
		for _, c := range want.RepeatRight {
			right += c
		}
		if want.Status == StatusOK && (len(want.RepeatRight) != want.Sequences || float64(right)/float64(want.Repeats) != want.RepeatAccuracy) {
			t.Errorf("row %d: %d right repeats over %d sequences, accuracy %v of %d repeats", i, right, len(want.RepeatRight), want.RepeatAccuracy, want.Repeats)
		}
		want.RepeatRight = nil
		if !reflect.DeepEqual(csvRows[i], want) {
			t.Fatalf("csv row %d = %+v\nwant %+v", i, csvRows[i], want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, FilePlot)); err != nil {
		t.Error(err)
	}
	o2, err := Run(context.Background(), p, Options{Dir: dir})
	if err != nil || o2.Reused != n || o2.Trained != 0 {
		t.Fatalf("second run: %+v, %v", o2, err)
	}

	// Render from the saved rows alone.
	for _, name := range []string{FileTable, FileCSV, FileJSON, FilePlot} {
		os.Remove(filepath.Join(dir, name))
	}
	rows, err := Render(p, Options{Dir: dir})
	if err != nil || len(rows) != 2*n {
		t.Fatalf("render: %d rows, %v", len(rows), err)
	}
	if table2, err := os.ReadFile(filepath.Join(dir, FileTable)); err != nil || string(table2) != string(table) {
		t.Errorf("re-rendered table differs (%v):\n%s\nwant\n%s", err, table2, table)
	}

	// Interrupt the last model (the time model where there is one) at
	// update 3, then resume.
	dir2 := t.TempDir()
	p1 := p
	p1.Encodings = encs[n-1:]
	r, jobs, task, cfg := firstTask(t, p1, dir2)
	js, _, err := r.jobs()
	if err != nil {
		t.Fatal(err)
	}
	ckpt, err := js.CkptOf(jobs[0].Key())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	_, err = trainer.RunTask(ctx, cfg, task, trainer.RunOptions{Ckpt: ckpt, SaveEvery: 100,
		BeforeStep: func(step int) error {
			if step == 3 {
				cancel()
				return context.Canceled
			}
			return nil
		}})
	if !errors.Is(err, trainer.ErrInterrupted) {
		t.Fatalf("interrupt: %v", err)
	}
	o3, err := Run(context.Background(), p1, Options{Dir: dir2})
	if err != nil {
		t.Fatal(err)
	}
	for i, row := range o3.Rows {
		want := o.Rows[2*(n-1)+i]
		if row.Encoding != want.Encoding || row.RepeatAccuracy != want.RepeatAccuracy || row.RepeatBits != want.RepeatBits ||
			row.Bits != want.Bits || row.ValRepeatAcc != want.ValRepeatAcc || row.TrainLoss != want.TrainLoss {
			t.Fatalf("resumed row %d = %+v\nuninterrupted %+v", i, row, want)
		}
	}

	// The maps of a trained model.
	params, spec, err := LoadModel(p, Options{Dir: dir}, jobs[0])
	if err != nil || spec.Time != jobs[0].Time || spec.Length != 12 {
		t.Fatalf("LoadModel: %+v, %v", spec, err)
	}
	seqs := r.test[:2]
	attn, exs, err := Attention(params, spec, seqs, 0)
	if err != nil || len(attn) != 2 || len(attn[0]) != 2 || attn[0][0].Rows != 12 || len(exs) != 2 {
		t.Fatalf("attention: %d, %v", len(attn), err)
	}
	for b := range attn {
		for h := range attn[b] {
			for i := 0; i < 12; i++ {
				sum := 0.0
				for j := 0; j < 12; j++ {
					if j > i && attn[b][h].At(i, j) != 0 {
						t.Fatalf("query %d attends to the later key %d", i, j)
					}
					sum += attn[b][h].At(i, j)
				}
				if sum < 0.999 || sum > 1.001 {
					t.Fatalf("attention of query %d sums to %g", i, sum)
				}
			}
		}
	}
	src, err := SourceAttention(attn, exs, seqs)
	if err != nil || len(src) != 2 || !(src[0] > 0 && src[0] <= 1) {
		t.Fatalf("source attention %v, %v", src, err)
	}
	layer, head, share, _, err := SourceHead(params, spec, seqs)
	if err != nil || layer != 0 || share != slices.Max(src) || src[head] != share {
		t.Fatalf("source head: block %d head %d share %g (%v), want the largest of %v", layer, head, share, err, src)
	}
	series, err := AttentionByTime(attn, exs, 2*p.Seqs.Period, 1)
	if err != nil || len(series) != 2 || len(series[0].X) != 32 {
		t.Fatalf("attention by time: %v", err)
	}
	if _, _, err := Attention(params, spec, seqs, 1); err == nil || !strings.Contains(err.Error(), "block 1 does not exist") {
		t.Errorf("block 1 of 1: %v", err)
	}
	png, err := DrawSequence(seqs[0], 12, p.Seqs.Period, "a sequence", 0, 0)
	if err != nil || len(png) < 1000 {
		t.Fatalf("draw: %d bytes, %v", len(png), err)
	}
	if _, err := DrawSequence(seqs[0], 99, p.Seqs.Period, "", 0, 0); err == nil {
		t.Error("drew 99 events of a shorter sequence")
	}
}

// TestTaskConfigRefused: a checkpoint of other sequences or positions is
// refused, naming both.
func TestTaskConfigRefused(t *testing.T) {
	_, _, task, _ := firstTask(t, tinyPlan("rope"), t.TempDir())
	other := *task
	other.data.Seqs.Period = 8
	saved, _ := other.TaskConfig()
	if err := task.CheckTaskConfig(saved); err == nil || !strings.Contains(err.Error(), "bars of P = 8") {
		t.Fatalf("another period accepted: %v", err)
	}
	other = *task
	other.data.Time = true
	saved, _ = other.TaskConfig()
	if err := task.CheckTaskConfig(saved); err == nil || !strings.Contains(err.Error(), "trained with time positions") {
		t.Fatalf("time positions accepted for an index model: %v", err)
	}
	own, _ := task.TaskConfig()
	if err := task.CheckTaskConfig(own); err != nil {
		t.Fatal(err)
	}
	if err := task.SetState([]byte("{")); err == nil {
		t.Error("corrupt state accepted")
	}
}

// TestBadInput: bad plans and tasks are refused before anything runs,
// with errors naming the problem.
func TestBadInput(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Plan)
		want string
	}{
		{"unknown encoding", func(p *Plan) { p.Encodings = []string{"rope3d"} }, "rope3d"},
		{"unknown time encoding", func(p *Plan) { p.Encodings = []string{"rope3d@time"} }, "rope3d"},
		{"time twice", func(p *Plan) { p.Encodings = []string{"rope@time@time"} }, "@time given twice"},
		{"bad override", func(p *Plan) { p.Encodings = []string{"rope@time@rope-bass=1"} }, "rope-bass"},
		{"t5 at time", func(p *Plan) { p.Encodings = []string{"t5@time"} }, "t5@time-seed1 asks for time positions: posenc: encoding t5 accepts line positions; the model gives it real positions"},
		{"grid encoding", func(p *Plan) { p.Encodings = []string{"rope-2d"} }, "line positions"},
		{"duplicate encoding", func(p *Plan) { p.Encodings = []string{"rope", "rope"} }, "given twice"},
		{"duplicate seed", func(p *Plan) { p.Seeds = []int64{1, 1} }, "seed 1 given twice"},
		{"factors", func(p *Plan) { p.Factors = []int{2, 4} }, "must start with 1"},
		{"factors order", func(p *Plan) { p.Factors = []int{1, 4, 2} }, "must increase"},
		{"length", func(p *Plan) { p.Base.SeqLen = 0 }, "training length"},
		{"sequences", func(p *Plan) { p.TestSeqs = 0 }, "sequences"},
		{"not causal", func(p *Plan) { p.Base.Model.Causal = false }, "causal"},
		{"vocabulary", func(p *Plan) { p.Base.Model.Vocab = 16 }, "want 16 tokens + BOS = 17"},
		{"period", func(p *Plan) { p.Seqs.Period = 0 }, "period 0 must be positive"},
		{"negative period", func(p *Plan) { p.Seqs.Period = -16 }, "period -16 must be positive"},
		{"repeat probability", func(p *Plan) { p.Seqs.Repeat = 1.2 }, "repeat probability 1.2 must be in [0, 1]"},
		{"no encodings", func(p *Plan) { p.Encodings = nil }, "needs encodings"},
	} {
		p, _ := Preset("quick")
		c.edit(&p)
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
	if _, err := Preset("huge"); err == nil || !strings.Contains(err.Error(), `unknown preset "huge"`) {
		t.Errorf("unknown preset: %v", err)
	}
	for _, name := range PresetNames() {
		p, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("preset %s: %v", name, err)
		}
	}
	// The tasks' own checks.
	p := tinyPlan("rope")
	val, _ := Set(p.Seqs, 1, 2, 12)
	short, _ := Set(p.Seqs, 1, 2, 5)
	cfg := p.Base
	cfg.Model.Pos = "rope"
	nonCausal := cfg
	nonCausal.Model.Causal = false
	t5 := cfg
	t5.Model.Pos = "t5"
	for _, c := range []struct {
		name string
		cfg  trainer.Config
		data Data
		want string
	}{
		{"no validation", cfg, Data{Seqs: p.Seqs}, "no validation sequences"},
		{"short validation", cfg, Data{Seqs: p.Seqs, Val: short}, "validation sequence 0 has 5 events, want at least 12"},
		{"not causal", nonCausal, Data{Seqs: p.Seqs, Val: val}, "causal"},
		{"bad sequences", cfg, Data{Seqs: SeqOptions{Period: -1}, Val: val}, "period -1"},
		{"t5 at time", t5, Data{Seqs: p.Seqs, Val: val, Time: true}, "time task: time positions: posenc: encoding t5 accepts line positions"},
	} {
		if _, err := NewTask(c.cfg, c.data); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
	if err := RunJob(context.Background(), p, Options{Dir: t.TempDir()}, 1); err == nil || !strings.Contains(err.Error(), "job 1 does not exist") {
		t.Errorf("job 1 of 1: %v", err)
	}
	if _, err := Evaluate(nil, nil, EvalSpec{}); err == nil || !strings.Contains(err.Error(), "no sequences") {
		t.Errorf("no sequences: %v", err)
	}
}

// TestDefaultEncodings: every index encoding once, and a time variant
// exactly for the candidates that serve real positions, right after its
// index model; the quick preset keeps the entries of QuickBases.
func TestDefaultEncodings(t *testing.T) {
	encs := DefaultEncodings()
	for _, s := range IndexEncodings {
		i := slices.Index(encs, s)
		if i < 0 {
			t.Fatalf("%s missing from %v", s, encs)
		}
		e, _ := ParseEntry(s)
		served := RealServed(e.Variant.Base, BaseConfig().Model.PosOpts) == nil
		e.Time = true
		hasTime := slices.Contains(encs, e.Label())
		if want := served && slices.Contains(TimeCandidates, e.Variant.Base); hasTime != want {
			t.Errorf("%s: time variant %v, want %v", s, hasTime, want)
		}
		if hasTime && encs[i+1] != e.Label() {
			t.Errorf("%s is not after %s: %v", e.Label(), s, encs)
		}
	}
	if !slices.Contains(encs, "rope@time") || !slices.Contains(encs, "dpb@time@dpb-depth=1") {
		t.Errorf("default entries %v", encs)
	}
	q, _ := Preset("quick")
	if want := []string{"none", "t5", "alibi", "alibi@time", "rope", "rope@time"}; !slices.Equal(q.Encodings, want) {
		t.Errorf("quick entries %v, want %v", q.Encodings, want)
	}
	e, err := ParseEntry("fire@time@pos-init-std=0.01")
	if err != nil || !e.Time || e.Variant.Base != "fire" || e.Label() != "fire@time@pos-init-std=0.01" {
		t.Fatalf("entry %+v (%s), %v", e, e.Label(), err)
	}
	if e, _ := ParseEntry("rope@pos-init-std=0.01@time"); e.Label() != "rope@time@pos-init-std=0.01" {
		t.Errorf("label %s", e.Label())
	}
}

// TestTimesReachModel: a time model's scores depend on the onsets (the
// same tokens at stretched times score differently) and an index model's
// do not; a graph rebound to a second sequence scores it as a graph built
// for it alone does.
func TestTimesReachModel(t *testing.T) {
	if len(timeEncodings()) == 0 {
		t.Skip("rope does not serve real positions")
	}
	p := tinyPlan("rope")
	seqs, err := Set(p.Seqs, 5, 2, 12)
	if err != nil {
		t.Fatal(err)
	}
	stretched := make([]Sequence, len(seqs))
	for i, s := range seqs {
		s2 := s
		s2.Times = make([]float64, s.Len())
		for k, v := range s.Times {
			s2.Times[k] = 1.5 * v
		}
		stretched[i] = s2
	}
	model := p.Base.Model
	model.Pos = "rope"
	params := graph.NewParams(tensor.Float64, 3)
	for _, time := range []bool{false, true} {
		spec := EvalSpec{Model: model, Time: time, Length: 12, Batch: 1, Period: p.Seqs.Period}
		a, err := Evaluate(params, seqs, spec)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Evaluate(params, stretched, spec)
		if err != nil {
			t.Fatal(err)
		}
		if (a.Bits != b.Bits) != time {
			t.Errorf("time %v: %g bits, %g bits with the onsets stretched", time, a.Bits, b.Bits)
		}
		// Two sequences through one graph (the second rebound) against
		// each alone.
		one, _ := Evaluate(params, seqs[:1], spec)
		two, _ := Evaluate(params, seqs[1:], spec)
		if math.Abs(a.Bits-(one.Bits+two.Bits)/2) > 1e-12 {
			t.Errorf("time %v: %g bits through one graph, %g and %g alone", time, a.Bits, one.Bits, two.Bits)
		}
	}
}
