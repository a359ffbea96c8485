package copestudy

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/experiments/copetasks"
	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
)

// tinyPlan is a plan of tiny models on tiny tasks: copy of 3 data tokens
// (V = 4) in contexts of 6 tokens, tested at 6 and 12; counting over 2
// variables, 2 statements in contexts of 8 tokens, tested at 8 and 16.
func tinyPlan(encs ...string) Plan {
	p, _ := Preset("quick")
	p.Preset, p.Encodings, p.Seeds = "test", encs, []int64{1}
	p.Tasks = []TaskPlan{
		{Opts: copetasks.Options{Task: copetasks.TaskCopy, Copy: copetasks.CopyOptions{Tokens: 4, Data: 3}}, Train: 6,
			Conditions: []Condition{{IID, 6}, {Longer, 12}}},
		{Opts: copetasks.Options{Task: copetasks.TaskCount, Count: copetasks.CountOptions{Vars: 2, Ops: 2, MaxValue: 10, SetWeight: 1, IncWeight: 7}},
			Train: 8, Conditions: []Condition{{IID, 8}, {Longer, 16}}},
	}
	p.Base.Model.DModel, p.Base.Model.Heads, p.Base.Model.Layers, p.Base.Model.FFN = 8, 2, 1, 16
	p.Base.Steps, p.Base.Batch, p.Base.Warmup, p.Base.EvalBatch = 6, 4, 2, 4
	p.ValSeqs, p.TestSeqs = 4, 6
	return p
}

// wantRows are the (task, encoding, condition, T) of the rows of
// tinyPlan(encs...) in order.
func wantRows(encs []string) [][4]string {
	var out [][4]string
	for _, t := range []struct{ name, l1, l2 string }{{"copy", "10", "16"}, {"count", "11", "19"}} {
		for _, e := range encs {
			out = append(out, [4]string{t.name, e, IID, t.l1}, [4]string{t.name, e, Longer, t.l2})
		}
	}
	return out
}

// TestRunResumes runs a tiny study (cope and rope on both tasks), checks
// its outputs (rows, CSV, JSON, table, plot), runs it again (every model
// reused), renders from the saved rows alone, then interrupts a second
// study mid-training and checks that running it again resumes and gives
// the rows of the uninterrupted run bit for bit.
func TestRunResumes(t *testing.T) {
	encs := []string{"cope", "rope"}
	p := tinyPlan(encs...)
	dir := t.TempDir()
	var log strings.Builder
	o, err := Run(context.Background(), p, Options{Dir: dir, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if o.Trained != 4 || o.Reused != 0 || len(o.Rows) != 8 {
		t.Fatalf("trained %d, reused %d, %d rows; want 4, 0, 8", o.Trained, o.Reused, len(o.Rows))
	}
	for i, want := range wantRows(encs) {
		r := o.Rows[i]
		answers := 3
		if r.Task == copetasks.TaskCount {
			answers = 1
		}
		if r.Task != want[0] || r.Encoding != want[1] || r.Condition != want[2] || strconv.Itoa(r.EvalLen) != want[3] ||
			r.Status != StatusOK || r.Sequences != 6 || r.Answers != 6*answers || r.TrainSteps != 6 || !(r.Bits > 0) || len(r.Right) != 6 ||
			r.Base != r.Encoding || !(r.Majority > 0) || r.Accuracy < 0 || r.Accuracy > 1 {
			t.Fatalf("row %d: %+v, want %v", i, r, want)
		}
	}
	table, err := os.ReadFile(filepath.Join(dir, FileTable))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"## Selective copy: accuracy on answer tokens (%)", "## Selective copy: exact answers", "## Counting: bits per answer token",
		"| cope |", "| *majority answer* |", "longer (T = 16)", "## Training", "| count | rope |"} {
		if !strings.Contains(string(table), s) {
			t.Errorf("table.md has no %q:\n%s", s, table)
		}
	}
	if strings.Contains(string(table), "## Counting: exact answers") {
		t.Error("table.md has exact answers of counting (one answer token: its accuracy)")
	}
	f, err := LoadResults(dir)
	if err != nil || len(f.Rows) != 8 || !reflect.DeepEqual(f.Plan.Tasks, p.Tasks) || !reflect.DeepEqual(f.Rows, o.Rows) {
		t.Fatalf("results.json: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, FileCSV))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil || len(recs) != 9 || !slices.Equal(recs[0], csvHeader) || recs[3][1] != "copy" || recs[3][2] != "rope" || recs[3][5] != IID {
		t.Fatalf("results.csv (%v):\n%s", err, b)
	}
	if _, err := os.Stat(filepath.Join(dir, FilePlot)); err != nil {
		t.Error(err)
	}
	o2, err := Run(context.Background(), p, Options{Dir: dir})
	if err != nil || o2.Reused != 4 || o2.Trained != 0 || !reflect.DeepEqual(o2.Rows, o.Rows) {
		t.Fatalf("second run: trained %d, reused %d, %v", o2.Trained, o2.Reused, err)
	}

	// Render from the saved rows alone.
	for _, name := range []string{FileTable, FileCSV, FileJSON, FilePlot} {
		os.Remove(filepath.Join(dir, name))
	}
	rows, err := Render(p, Options{Dir: dir})
	if err != nil || len(rows) != 8 {
		t.Fatalf("render: %d rows, %v", len(rows), err)
	}
	if table2, err := os.ReadFile(filepath.Join(dir, FileTable)); err != nil || string(table2) != string(table) {
		t.Errorf("re-rendered table differs (%v):\n%s\nwant\n%s", err, table2, table)
	}
	// Another plan's render in the same directory is refused.
	p3 := p
	p3.Base.Steps = 7
	if _, err := Render(p3, Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "another configuration") {
		t.Errorf("render of another plan: %v", err)
	}

	// Interrupt the counting cope model at update 3, then resume.
	dir2 := t.TempDir()
	p1 := p
	p1.Tasks, p1.Encodings = p.Tasks[1:], []string{"cope"}
	r, err := newRunner(p1, Options{Dir: dir2})
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ := p1.Jobs()
	task, cfg, _, err := r.newTask(jobs[0])
	if err != nil {
		t.Fatal(err)
	}
	js, err := r.jobs()
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
	if err != nil || o3.Trained != 1 {
		t.Fatalf("resumed run: %+v, %v", o3, err)
	}
	for i, row := range o3.Rows {
		want := o.Rows[4+i] // count-cope-seed1
		if row.Encoding != want.Encoding || row.Condition != want.Condition || row.Accuracy != want.Accuracy || row.Bits != want.Bits ||
			row.ValAccuracy != want.ValAccuracy || row.TrainLoss != want.TrainLoss || !slices.Equal(row.Right, want.Right) {
			t.Fatalf("resumed row %d = %+v\nuninterrupted %+v", i, row, want)
		}
	}
}

// TestRedo: -redo retrains one task's encoding and reuses the others; a
// name that labels no job is refused; saved rows of other test conditions
// are not taken.
func TestRedo(t *testing.T) {
	p := tinyPlan("rope")
	p.Tasks = p.Tasks[:1]
	dir := t.TempDir()
	if _, err := Run(context.Background(), p, Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	p.Encodings = []string{"rope", "none"}
	o, err := Run(context.Background(), p, Options{Dir: dir, Redo: []string{"copy-none"}})
	if err != nil || o.Trained != 1 || o.Reused != 1 {
		t.Fatalf("redo: %+v, %v", o, err)
	}
	if _, err := Run(context.Background(), p, Options{Dir: dir, Redo: []string{"none"}}); err == nil || !strings.Contains(err.Error(), "no such encoding") {
		t.Errorf("-redo none (a label of no job): %v", err)
	}
	// Rows of other test conditions are not reused: nothing runs over
	// checkpoints of another configuration.
	p.Tasks = slices.Clone(p.Tasks)
	p.Tasks[0].Conditions = []Condition{{IID, 6}, {Longer, 10}}
	if _, err := Run(context.Background(), p, Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "another configuration") {
		t.Errorf("another longer condition: %v", err)
	}
}

// TestPlans: the presets are valid; the longer condition of every task is
// longer than training; the full preset has three seeds of every task and
// encoding; bad plans are refused before anything runs.
func TestPlans(t *testing.T) {
	for _, name := range PresetNames() {
		p, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("preset %s: %v", name, err)
		}
		for _, tp := range p.Tasks {
			i := slices.IndexFunc(tp.Conditions, func(c Condition) bool { return c.Name == Longer })
			if i < 0 || tp.Conditions[0].Name != IID || tp.Conditions[i].Context <= tp.Train || tp.Opts.Len(tp.Conditions[i].Context) <= tp.Opts.Len(tp.Train) {
				t.Errorf("preset %s, %s: conditions %+v", name, tp.Name(), tp.Conditions)
			}
		}
	}
	full, _ := Preset("full")
	jobs, _ := full.Jobs()
	if len(jobs) != 2*4*3 || jobs[0].Key() != "copy-cope-seed1" || jobs[23].Key() != "count-none-seed3" {
		t.Errorf("full preset: %d jobs, %s ... %s", len(jobs), jobs[0].Key(), jobs[len(jobs)-1].Key())
	}
	if _, err := Preset("huge"); err == nil || !strings.Contains(err.Error(), `unknown preset "huge"`) {
		t.Errorf("unknown preset: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(*Plan)
		want string
	}{
		{"unknown encoding", func(p *Plan) { p.Encodings = []string{"rope3d"} }, "rope3d"},
		{"grid encoding", func(p *Plan) { p.Encodings = []string{"rope-2d"} }, "line positions"},
		{"bad override", func(p *Plan) { p.Encodings = []string{"cope@cope-npox=3"} }, "cope-npox"},
		{"duplicate encoding", func(p *Plan) { p.Encodings = []string{"rope", "rope"} }, "encoding rope given twice"},
		{"duplicate seed", func(p *Plan) { p.Seeds = []int64{1, 1} }, "seed 1 given twice"},
		{"no encodings", func(p *Plan) { p.Encodings = nil }, "needs tasks, encodings and seeds"},
		{"duplicate task", func(p *Plan) { p.Tasks = append(p.Tasks, p.Tasks[0]) }, "task copy given twice"},
		{"first condition", func(p *Plan) { p.Tasks[0].Conditions = p.Tasks[0].Conditions[1:] }, "first condition must be the training context"},
		{"condition name", func(p *Plan) { p.Tasks[0].Conditions[1].Name = "a b" }, `condition name "a b"`},
		{"short condition", func(p *Plan) { p.Tasks[1].Conditions[1].Context = 20 }, "count condition longer: cope tasks: count: a context of 20 tokens cannot hold 8 statements"},
		{"bad task", func(p *Plan) { p.Tasks[0].Opts.Copy.Tokens = 1 }, "1 data tokens"},
		{"sequences", func(p *Plan) { p.TestSeqs = 0 }, "test sequences 0 must be positive"},
		{"not causal", func(p *Plan) { p.Base.Model.Causal = false }, "causal"},
	} {
		p, _ := Preset("quick")
		p.Tasks = DefaultTasks()
		c.edit(&p)
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
	ts, err := SelectTasks(DefaultTasks(), "count")
	if err != nil || len(ts) != 1 || ts[0].Name() != "count" {
		t.Errorf("select count: %v, %v", ts, err)
	}
	for _, bad := range []string{"flip-flop", "copy,copy"} {
		if _, err := SelectTasks(DefaultTasks(), bad); err == nil {
			t.Errorf("-tasks %s accepted", bad)
		}
	}
	if err := RunJob(context.Background(), tinyPlan("rope"), Options{Dir: t.TempDir()}, 2); err == nil || !strings.Contains(err.Error(), "job 2 does not exist") {
		t.Errorf("job 2 of 2: %v", err)
	}
}

// TestPairedSection: with two seeds the table compares the best encoding
// of each condition with the others, over seeds and test sequences.
func TestPairedSection(t *testing.T) {
	p := tinyPlan("cope", "none")
	p.Seeds = []int64{1, 2}
	var rows []Row
	for _, seed := range p.Seeds {
		for _, e := range []string{"cope", "none"} {
			acc := 0.5
			if e == "cope" {
				acc = 0.9 + 0.01*float64(seed)
			}
			rows = append(rows, Row{Task: "copy", Encoding: e, Seed: seed, Condition: IID, Status: StatusOK, Accuracy: acc,
				Sequences: 2, Answers: 6, Right: []int{3, int(acc*6+0.5) - 3}})
		}
	}
	s := pairedSection(&File{Plan: p, Rows: rows})
	if !strings.Contains(s, "| copy iid | cope | none | +41.50") || !strings.Contains(s, "cope beats none") {
		t.Errorf("paired section:\n%s", s)
	}
	var st study.ScoreTable
	if study.PairedSection("x", nil, &st, "a", "b", "c", "%.2f", 0) != "" {
		t.Error("a paired section without seeds")
	}
}
