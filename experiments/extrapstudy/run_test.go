package extrapstudy

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
)

// counter records the hooks' calls.
type counter struct {
	starts map[string][]int // model -> from-steps of its trainings
	steps  map[string]int   // model -> updates run
	evals  []string
	stopAt map[string]int // model -> interrupt before this update
}

func newCounter() *counter {
	return &counter{starts: map[string][]int{}, steps: map[string]int{}, stopAt: map[string]int{}}
}

func (c *counter) hooks() Hooks {
	return Hooks{
		TrainStart: func(m string, from int) { c.starts[m] = append(c.starts[m], from) },
		BeforeStep: func(m string, step int) error {
			if s, ok := c.stopAt[m]; ok && step == s {
				delete(c.stopAt, m)
				return errors.New("test interruption")
			}
			c.steps[m]++
			return nil
		},
		EvalStart: func(j string) { c.evals = append(c.evals, j) },
	}
}

func run(t *testing.T, p Plan, dir string, c *counter) (*Outcome, error) {
	t.Helper()
	return Run(context.Background(), p, tinyCorpus(t), Options{Dir: dir, Hooks: c.hooks()})
}

// scores maps "encoding/seed/len/protocol" to the status and bits per byte
// of rows.
func scores(rows []Row) map[string]string {
	out := map[string]string{}
	for _, r := range rows {
		out[strings.Join([]string{r.Encoding, r.Model, itoa(r.EvalLen), r.Protocol}, "/")] = r.Status + " " + ftoa(r.BitsPerByte)
	}
	return out
}

func TestRunAndRerender(t *testing.T) {
	p := tinyPlan("none", "learned", "rope")
	dir := t.TempDir()
	c := newCounter()
	o, err := run(t, p, dir, c)
	if err != nil {
		t.Fatal(err)
	}
	ns := len(RopeScalings)
	if o.Trained != 3 || len(c.evals) != 3+ns || len(o.Pending) != 0 {
		t.Fatalf("trained %d, evaluated %v, pending %v; want 3, %d, none", o.Trained, c.evals, o.Pending, 3+ns)
	}
	// Rows: none, learned, rope at 3 lengths x 2 protocols; the scalings at 2 lengths x 2.
	if len(o.Rows) != 3*3*2+ns*2*2 {
		t.Fatalf("%d rows, want %d", len(o.Rows), 3*3*2+ns*2*2)
	}
	var order []string
	for _, r := range o.Rows {
		if len(order) == 0 || order[len(order)-1] != r.Encoding {
			order = append(order, r.Encoding)
		}
		switch {
		case r.Encoding == "learned" && r.EvalLen > 8:
			if r.Status != StatusNA || r.BitsPerByte != 0 || !strings.Contains(r.Note, "learned table has 8 positions") {
				t.Errorf("learned at %d: %+v, want n/a", r.EvalLen, r)
			}
		case r.Status != StatusOK || !(r.BitsPerByte > 0) || !near(r.Perplexity, mathPow2(r.BitsPerByte)):
			t.Errorf("row %+v", r)
		}
		if r.Status == StatusOK {
			wantTok := 4 * 32 // 4 windows of 4L tile the same 128 targets at every length
			if r.Protocol == ProtocolLast {
				wantTok = (4 * 32 / r.EvalLen) * 8 // windows x L
			}
			if r.Tokens != wantTok {
				t.Errorf("%s at %d %s: %d tokens, want %d", r.Encoding, r.EvalLen, r.Protocol, r.Tokens, wantTok)
			}
			if r.EvalLen == 32 && !(r.PeakHeapMB > 0) {
				t.Errorf("%s at 4L: no peak heap", r.Encoding)
			}
			if !(r.TrainMsPerStep > 0) || r.TrainSteps != 6 || r.GitRev == "" || r.Machine == "" || r.BLAS == "" {
				t.Errorf("%s: training fields %+v", r.Encoding, r)
			}
		}
		if slices.Contains(RopeScalings, r.Encoding) && (r.EvalLen == 8 || r.Trained != "rope" || r.RopeScale != float64(r.EvalLen/8)) {
			t.Errorf("scaling row %+v", r)
		}
	}
	if want := append([]string{"none", "learned", "rope"}, RopeScalings...); !slices.Equal(order, want) {
		t.Errorf("row order %v, want %v", order, want)
	}
	for _, f := range []string{FileCSV, FileJSON, FileTable, PlotFile(ProtocolAll), PlotFile(ProtocolLast)} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	table, _ := os.ReadFile(filepath.Join(dir, FileTable))
	for _, s := range []string{"| learned |", "n/a", "= rope", "tiny preset"} {
		if !strings.Contains(string(table), s) {
			t.Errorf("table.md lacks %q:\n%s", s, table)
		}
	}

	// A finished study only re-renders.
	for _, f := range []string{FileTable, PlotFile(ProtocolAll), FileCSV} {
		os.Remove(filepath.Join(dir, f))
	}
	c2 := newCounter()
	o2, err := run(t, p, dir, c2)
	if err != nil {
		t.Fatal(err)
	}
	if o2.Trained != 0 || len(c2.starts) != 0 || len(c2.evals) != 0 || o2.Reused != 3 {
		t.Errorf("rerun trained %d (hooks %v %v), reused %d models", o2.Trained, c2.starts, c2.evals, o2.Reused)
	}
	if !mapsEqual(scores(o.Rows), scores(o2.Rows)) {
		t.Errorf("re-rendered rows differ")
	}
	for _, f := range []string{FileTable, PlotFile(ProtocolAll), FileCSV} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("not re-rendered: %v", err)
		}
	}
	// Render alone, too.
	os.Remove(filepath.Join(dir, FileJSON))
	o3, err := Render(p, tinyCorpus(t), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileJSON)); err != nil || len(o3.Rows) != len(o.Rows) {
		t.Errorf("Render: %v, %d rows", err, len(o3.Rows))
	}
}

// TestResume interrupts a study inside a training, then during another
// model's training, and checks that the resumed study redoes nothing and
// ends with the numbers of an uninterrupted one.
func TestResume(t *testing.T) {
	p := tinyPlan("none", "alibi", "rope")
	p.Scalings = []string{"rope-pi"}
	ref, err := run(t, p, t.TempDir(), newCounter())
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	c := newCounter()
	c.stopAt["alibi-seed1"] = 3 // after one checkpoint (SaveEvery 2) and one more update
	_, err = run(t, p, dir, c)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("error %v, want ErrInterrupted", err)
	}
	wantErr(t, err, "alibi-seed1: training interrupted at update 3 of 6", "run the same command again")
	if !slices.Equal(c.evals, []string{"none-seed1"}) || c.steps["none-seed1"] != 6 || c.steps["alibi-seed1"] != 3 {
		t.Fatalf("first session: evals %v, steps %v", c.evals, c.steps)
	}
	// The partial results are rendered on request, alibi and rope pending.
	o, err := Render(p, tinyCorpus(t), Options{Dir: dir})
	if err != nil || !slices.Equal(o.Pending, []string{"alibi-seed1", "rope-seed1"}) {
		t.Fatalf("render of the partial study: %v, pending %v", err, o.Pending)
	}

	c2 := newCounter()
	c2.stopAt["rope-seed1"] = 5
	_, err = run(t, p, dir, c2)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("second session: error %v", err)
	}
	if _, ok := c2.starts["none-seed1"]; ok {
		t.Errorf("second session retrained none: %v", c2.starts)
	}
	if !slices.Equal(c2.starts["alibi-seed1"], []int{3}) || c2.steps["alibi-seed1"] != 3 {
		t.Errorf("alibi resumed from %v and ran %d updates, want from 3, 3 updates", c2.starts["alibi-seed1"], c2.steps["alibi-seed1"])
	}
	if !slices.Equal(c2.evals, []string{"alibi-seed1"}) {
		t.Errorf("second session evaluated %v", c2.evals)
	}

	c3 := newCounter()
	o3, err := run(t, p, dir, c3)
	if err != nil {
		t.Fatal(err)
	}
	if len(c3.starts) != 1 || !slices.Equal(c3.starts["rope-seed1"], []int{5}) || c3.steps["rope-seed1"] != 1 {
		t.Errorf("third session trainings %v, steps %v; want rope from 5, 1 update", c3.starts, c3.steps)
	}
	if !slices.Equal(c3.evals, []string{"rope-seed1", "rope-pi-seed1"}) || o3.Resumed != 1 || o3.Reused != 2 {
		t.Errorf("third session evaluated %v, resumed %d, reused %d", c3.evals, o3.Resumed, o3.Reused)
	}
	if a, b := scores(ref.Rows), scores(o3.Rows); !mapsEqual(a, b) {
		t.Errorf("interrupted study differs from the uninterrupted one:\n%v\n%v", a, b)
	}
}

// TestSameSeedSameNumbers reruns a study from scratch.
func TestSameSeedSameNumbers(t *testing.T) {
	p := tinyPlan("t5")
	p.Scalings = nil
	a, err := run(t, p, t.TempDir(), newCounter())
	if err != nil {
		t.Fatal(err)
	}
	b, err := run(t, p, t.TempDir(), newCounter())
	if err != nil {
		t.Fatal(err)
	}
	if !mapsEqual(scores(a.Rows), scores(b.Rows)) {
		t.Errorf("reruns differ:\n%v\n%v", scores(a.Rows), scores(b.Rows))
	}
	p.Seeds = []int64{2}
	c, err := run(t, p, t.TempDir(), newCounter())
	if err != nil {
		t.Fatal(err)
	}
	if scores(c.Rows)["t5/t5-seed2/8/all"] == scores(a.Rows)["t5/t5-seed1/8/all"] {
		t.Errorf("seeds 1 and 2 give the same score")
	}
}

// TestSameBatches checks that every encoding of a seed sees the same batches.
func TestSameBatches(t *testing.T) {
	p := tinyPlan("none", "rope")
	c := tinyCorpus(t)
	var got [][]int
	for _, m := range p.ModelJobs() {
		b, err := trainer.NewBatcher(c.Train, m.Cfg.Batch, m.Cfg.SeqLen, uint64(m.Cfg.Seed))
		if err != nil {
			t.Fatal(err)
		}
		ids, tg := make([]int, 16), make([]int, 16)
		b.Next(ids, tg)
		got = append(got, ids)
	}
	if !slices.Equal(got[0], got[1]) {
		t.Errorf("batches differ between encodings: %v %v", got[0], got[1])
	}
}

// TestMismatchedOutputDir checks that saved work of another configuration
// is reported before anything runs.
func TestMismatchedOutputDir(t *testing.T) {
	p := tinyPlan("none")
	dir := t.TempDir()
	if _, err := run(t, p, dir, newCounter()); err != nil {
		t.Fatal(err)
	}
	p.Base.Steps = 8
	c := newCounter()
	_, err := run(t, p, dir, c)
	wantErr(t, err, "none-seed1", "another configuration", "nothing was run", "-fresh")
	if len(c.starts)+len(c.evals) != 0 {
		t.Errorf("work started: %v %v", c.starts, c.evals)
	}
	if err := Clean(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, p, dir, c); err != nil {
		t.Fatalf("after Clean: %v", err)
	}
}

func TestCancelledContext(t *testing.T) {
	p := tinyPlan("none")
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Run(ctx, p, tinyCorpus(t), Options{Dir: dir})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("error %v, want ErrInterrupted", err)
	}
}

func TestBadInput(t *testing.T) {
	good := tinyCorpus(t)
	short, err := trainer.NewCorpus(tinyText()[:200]) // validation part of 20 bytes
	if err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty.txt")
	os.WriteFile(empty, nil, 0o644)
	if _, err := trainer.LoadCorpus(empty); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty corpus: %v", err)
	}
	tiny, _ := trainer.NewCorpus([]byte("abcdefgh"))
	for _, tc := range []struct {
		name string
		p    func(Plan) Plan
		c    *trainer.Corpus
		want []string
	}{
		{"unknown encoding", func(p Plan) Plan { p.Encodings = []string{"none", "rotary"}; return p }, good,
			[]string{`unknown encoding "rotary"`, "alibi"}},
		{"scaling as trained", func(p Plan) Plan { p.Encodings = []string{"rope-yarn"}; return p }, good,
			[]string{"rope-yarn", "evaluation-time scaling"}},
		{"unknown scaling", func(p Plan) Plan { p.Scalings = []string{"rope-xx"}; return p }, good, []string{`"rope-xx"`}},
		{"duplicate", func(p Plan) Plan { p.Encodings = []string{"none", "none"}; return p }, good, []string{"twice"}},
		{"no seeds", func(p Plan) Plan { p.Seeds = nil; return p }, good, []string{"no seeds"}},
		{"factor below 1", func(p Plan) Plan { p.Factors = []int{0, 1}; return p }, good, []string{"at least 1"}},
		{"factor not dividing", func(p Plan) Plan { p.Factors = []int{1, 3, 4}; return p }, good, []string{"divide"}},
		{"too-short validation", func(p Plan) Plan { return p }, short,
			[]string{"validation split", "20 bytes", "Le = 4L = 32"}},
		{"too-short corpus", func(p Plan) Plan { return p }, tiny, []string{"too short"}},
		{"nil corpus", func(p Plan) Plan { return p }, nil, []string{"no corpus"}},
		{"bad model", func(p Plan) Plan { p.Base.Model.Heads = 3; return p }, good, []string{"heads 3"}},
	} {
		dir := filepath.Join(t.TempDir(), "out")
		c := newCounter()
		_, err := Run(context.Background(), tc.p(tinyPlan("none", "rope")), tc.c, Options{Dir: dir, Hooks: c.hooks()})
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, s := range tc.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q lacks %q", tc.name, err, s)
			}
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) || len(c.starts) != 0 {
			t.Errorf("%s: something was written or trained", tc.name)
		}
	}
}

// TestEveryTrainableEncoding runs the tiny study over every encoding of
// the full preset: each trains and evaluates at 4L (learned: n/a).
func TestEveryTrainableEncoding(t *testing.T) {
	p := tinyPlan(TrainableEncodings...)
	p.Base.Steps = 2
	o, err := run(t, p, t.TempDir(), newCounter())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range o.Rows {
		if r.Status != StatusOK && !(r.Encoding == "learned" && r.EvalLen > 8) {
			t.Errorf("%s at %d %s: %s %s", r.Encoding, r.EvalLen, r.Protocol, r.Status, r.Note)
		}
	}
	if len(o.Rows) != len(TrainableEncodings)*3*2+len(RopeScalings)*2*2 {
		t.Errorf("%d rows", len(o.Rows))
	}
}

func TestAggregate(t *testing.T) {
	var rows []Row
	for i, v := range []float64{1, 2, 3} {
		rows = append(rows, Row{Encoding: "none", Seed: int64(i + 1), EvalLen: 8, Protocol: ProtocolAll, Status: StatusOK, BitsPerByte: v})
		rows = append(rows, Row{Encoding: "learned", Seed: int64(i + 1), EvalLen: 16, Protocol: ProtocolAll, Status: StatusNA, Note: "why"})
	}
	cells := aggregate(rows, func(r Row) float64 { return r.BitsPerByte })
	if c := cells[cellKey{"none", 8, ProtocolAll}]; c.N != 3 || c.Mean != 2 || c.Std != 1 || c.NA {
		t.Errorf("none: %+v, want mean 2, std 1 over 3", c)
	}
	if c := cells[cellKey{"learned", 16, ProtocolAll}]; !c.NA || c.Note != "why" {
		t.Errorf("learned: %+v, want n/a", c)
	}
	if s := fmtCell(cells[cellKey{"none", 8, ProtocolAll}], true, 3); s != "2.000 ± 1.000 [-0.484, 4.484]" {
		t.Errorf("cell %q", s)
	}
	if _, ok := cells[cellKey{"none", 16, ProtocolAll}]; ok || fmtCell(study.Cell{}, false, 3) != "pending" {
		t.Errorf("missing cell")
	}
}

// TestSeveralSeeds checks the mean ± std cells and the plots with error bars.
func TestSeveralSeeds(t *testing.T) {
	p := tinyPlan("alibi", "rope")
	p.Seeds = []int64{1, 2}
	p.Scalings = []string{"rope-yarn"}
	dir := t.TempDir()
	o, err := run(t, p, dir, newCounter())
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Rows) != 2*(2*3*2+2*2) {
		t.Errorf("%d rows", len(o.Rows))
	}
	table, _ := os.ReadFile(filepath.Join(dir, FileTable))
	if !strings.Contains(string(table), " ± ") || !strings.Contains(string(table), "[95% t interval of the mean] over 2 seeds") {
		t.Errorf("table.md:\n%s", table)
	}
	for _, pr := range Protocols {
		if st, err := os.Stat(filepath.Join(dir, PlotFile(pr))); err != nil || st.Size() < 1000 {
			t.Errorf("plot %s: %v", pr, err)
		}
	}
}

// TestWholeSplit checks that a plan without a window cap scores every byte of
// the validation split after the first at every length under protocol
// "all", although the split is not a multiple of any length, and that the
// rows say which BLAS and Go computed them.
func TestWholeSplit(t *testing.T) {
	p := tinyPlan("alibi")
	p.MaxWindows = 0
	c := tinyCorpus(t)
	if (len(c.Val)-1)%32 == 0 {
		t.Fatalf("the tiny validation split (%d bytes) should not tile by 32", len(c.Val))
	}
	o, err := Run(context.Background(), p, c, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Rows) != 6 {
		t.Fatalf("%d rows, want 3 lengths x 2 protocols", len(o.Rows))
	}
	for _, r := range o.Rows {
		if r.Protocol == ProtocolAll && r.Tokens != len(c.Val)-1 {
			t.Errorf("Le %d: %d targets scored, want the whole split's %d", r.EvalLen, r.Tokens, len(c.Val)-1)
		}
		if r.BLAS == "" || r.GoVersion == "" {
			t.Errorf("Le %d %s: BLAS %q, Go %q not recorded", r.EvalLen, r.Protocol, r.BLAS, r.GoVersion)
		}
	}
}

// TestJobsEqualRun checks that running every job separately (in reverse
// order, as an array scheduler may) and then rendering gives the rows of a
// single-process run, and that a bad job number is a clear error.
func TestJobsEqualRun(t *testing.T) {
	p := tinyPlan("none", "rope")
	p.Seeds = []int64{1, 2}
	one, err := run(t, p, t.TempDir(), newCounter())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	jobs := p.Jobs()
	if len(jobs) != 4 {
		t.Fatalf("%d jobs, want 2 encodings x 2 seeds", len(jobs))
	}
	for n := len(jobs) - 1; n >= 0; n-- {
		o, err := RunJob(context.Background(), p, tinyCorpus(t), Options{Dir: dir}, n)
		if err != nil {
			t.Fatal(err)
		}
		if o.Trained != 1 || len(o.Files) != 0 {
			t.Fatalf("job %d: %d trainings, rendered %v; want 1 training and no rendering", n, o.Trained, o.Files)
		}
	}
	o, err := Render(p, tinyCorpus(t), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	a, b := scores(one.Rows), scores(o.Rows)
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("%d rows in one process, %d from jobs", len(a), len(b))
	}
	for k, v := range a {
		if b[k] != v {
			t.Errorf("%s: one process %s, jobs %s", k, v, b[k])
		}
	}
	// A finished job is skipped when run again.
	o, err = RunJob(context.Background(), p, tinyCorpus(t), Options{Dir: dir}, 0)
	if err != nil || o.Trained != 0 || o.Reused != 1 {
		t.Fatalf("rerun of a finished job: %d trainings, %d reused, %v", o.Trained, o.Reused, err)
	}
	_, err = RunJob(context.Background(), p, tinyCorpus(t), Options{Dir: dir}, 4)
	wantErr(t, err, "job 4", "4 jobs, numbered 0 to 3")
}

// TestLocks checks that a model whose lock another process holds is not
// touched (the error names the model and the holder), that rendering and
// cleaning refuse while their locks are held, and that the study runs once
// they are released.
func TestLocks(t *testing.T) {
	p := tinyPlan("none")
	dir := t.TempDir()
	unlock, err := trainer.Lock(filepath.Join(dir, "models", "none-seed1", "job.lock"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = run(t, p, dir, newCounter())
	wantErr(t, err, "none-seed1/job.lock is locked by another run", "pid")
	wantErr(t, Clean(dir), "not cleaning", "pid")
	unlock()
	unlock, err = trainer.Lock(filepath.Join(dir, renderLock))
	if err != nil {
		t.Fatal(err)
	}
	_, err = run(t, p, dir, newCounter())
	wantErr(t, err, "render.lock is locked by another run")
	wantErr(t, Clean(dir), "not cleaning")
	unlock()
	if _, err := Render(p, tinyCorpus(t), Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if err := Clean(dir); err != nil {
		t.Fatal(err)
	}
}

// TestCells checks the (label, column) cells of a study table and the
// order of the labels.
func TestCells(t *testing.T) {
	var rows []Row
	for i, v := range []float64{4, 6} {
		rows = append(rows, Row{Encoding: "rope", Seed: int64(i + 1), EvalLen: 8, Status: StatusOK, BitsPerByte: v})
		rows = append(rows, Row{Encoding: "alibi", Seed: int64(i + 1), EvalLen: 16, Status: StatusOK, BitsPerByte: 1})
		rows = append(rows, Row{Encoding: "rope", Seed: int64(i + 1), EvalLen: 16, Status: StatusNA, Note: "beyond"})
	}
	cells, labels := study.Cells(rows, func(r Row) string { return r.Encoding }, func(r Row) string { return strconv.Itoa(r.EvalLen) },
		func(r Row) (bool, string) { return r.Status != StatusOK, r.Note }, func(r Row) float64 { return r.BitsPerByte })
	if !slices.Equal(labels, []string{"rope", "alibi"}) {
		t.Errorf("labels %q, want [rope alibi]", labels)
	}
	if c := cells[[2]string{"rope", "8"}]; c.N != 2 || c.Mean != 5 {
		t.Errorf("rope at 8: %+v, want mean 5 over 2", c)
	}
	if c := cells[[2]string{"rope", "16"}]; !c.NA || c.Note != "beyond" {
		t.Errorf("rope at 16: %+v, want n/a", c)
	}
	if c := cells[[2]string{"alibi", "16"}]; c.N != 2 || c.Mean != 1 || len(cells) != 3 {
		t.Errorf("alibi at 16: %+v (%d cells), want mean 1 over 2 and 3 cells", c, len(cells))
	}
}

// TestRunDamagedCheckpoint: a model checkpoint cut short, of a model in
// training or of a finished one with evaluations pending, is reported, set
// aside and that model alone trained again, with the numbers of an
// undamaged study; the others are not retrained.
func TestRunDamagedCheckpoint(t *testing.T) {
	p := tinyPlan("none", "alibi")
	refDir := t.TempDir()
	ref, err := run(t, p, refDir, newCounter())
	if err != nil {
		t.Fatal(err)
	}
	cut := func(path string) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b[:len(b)/2], 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A finished model whose evaluation is pending.
	cut(filepath.Join(refDir, "models", "none-seed1", "ckpt.safetensors"))
	if err := os.Remove(filepath.Join(refDir, "results", "none-seed1.json")); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	c := newCounter()
	o, err := Run(context.Background(), p, tinyCorpus(t), Options{Dir: refDir, Hooks: c.hooks(), Log: &log})
	if err != nil {
		t.Fatalf("%v\nlog:\n%s", err, log.String())
	}
	if !slices.Equal(c.starts["none-seed1"], []int{0}) || len(c.starts) != 1 || !strings.Contains(log.String(), "ckpt.safetensors.bad") {
		t.Fatalf("trainings %v; log:\n%s", c.starts, log.String())
	}
	if a, b := scores(ref.Rows), scores(o.Rows); !mapsEqual(a, b) {
		t.Errorf("retrained study differs:\n%v\n%v", a, b)
	}

	// A model interrupted in training, its checkpoint then cut short.
	dir := t.TempDir()
	c = newCounter()
	c.stopAt["alibi-seed1"] = 3
	if _, err := run(t, p, dir, c); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("error %v, want ErrInterrupted", err)
	}
	cut(filepath.Join(dir, "models", "alibi-seed1", "ckpt.safetensors"))
	c = newCounter()
	o, err = run(t, p, dir, c)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.starts["alibi-seed1"], []int{0}) || len(c.starts) != 1 {
		t.Fatalf("trainings %v, want alibi from 0 only", c.starts)
	}
	if a, b := scores(ref.Rows), scores(o.Rows); !mapsEqual(a, b) {
		t.Errorf("retrained study differs:\n%v\n%v", a, b)
	}
}

// TestLongTextProtocols: a plan with long-text protocols scores each on
// the trained encodings (not the RoPE scalings) at every length, streamed;
// chunks of L at Le = L is the full context at L (the same windows);
// sinks is n/a for an absolute table past its window, with the reason;
// the tables, the cost table and a plot per protocol are written, and the
// saved rows of the plan without the protocols are not reused.
func TestLongTextProtocols(t *testing.T) {
	p := tinyPlan("learned", "alibi", "rope", "cope")
	p.Scalings = []string{"rope-yarn"}
	p.Stream = true
	p.Seeds = []int64{1, 2} // paired comparisons need two
	p.LongText = LongTextProtocols(8)
	dir := t.TempDir()
	o, err := run(t, p, dir, newCounter())
	if err != nil {
		t.Fatal(err)
	}
	get := map[string]Row{}
	for _, r := range o.Rows {
		get[r.Encoding+"/"+itoa(r.EvalLen)+"/"+r.Protocol] = r
	}
	for _, e := range []string{"learned", "alibi", "rope", "cope"} {
		for _, le := range []int{8, 16, 32} {
			for _, pr := range p.LongText {
				r, ok := get[e+"/"+itoa(le)+"/"+pr.String()]
				switch {
				case !ok:
					t.Fatalf("no row for %s at %d with %s", e, le, pr)
				case e == "learned" && pr.Name == trainer.ProtoSinks && le > 8 || e == "learned" && pr.Name == trainer.ProtoMemory:
					if r.Status != StatusNA || r.Note == "" {
						t.Errorf("%s at %d with %s: %s %q, want n/a with a reason", e, le, pr, r.Status, r.Note)
					}
				case r.Status != StatusOK || !(r.BitsPerByte > 0) || r.Tokens != 4*32 || !(r.EvalMsPerToken > 0) || r.Note != "":
					t.Errorf("%s at %d with %s: %+v", e, le, pr, r)
				case le == 32 && !(r.PeakHeapMB > 0):
					t.Errorf("%s at 4L with %s: no peak memory", e, pr)
				}
			}
		}
		full, chunks := get[e+"/8/all"], get[e+"/8/chunks:8"]
		if !near(full.BitsPerByte, chunks.BitsPerByte) {
			t.Errorf("%s: chunks of L at Le = L %.12f bits/byte, the full context %.12f", e, chunks.BitsPerByte, full.BitsPerByte)
		}
	}
	for k := range get {
		if strings.HasPrefix(k, "rope-yarn/") && !strings.HasSuffix(k, "/all") && !strings.HasSuffix(k, "/last-L") {
			t.Errorf("a long-text protocol row for a RoPE scaling: %s", k)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, FileTable))
	for _, s := range []string{"protocol sinks:8:4: every target of the windows of Le, each scored in sliding cache of 8 keeping 4 sinks",
		"## Long-text protocols at Le = 32: quality and cost", "| alibi | memory:8:8 |", "| learned | sinks:8:4 | n/a |",
		"Paired comparisons, protocol stride:8:4"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("table.md lacks %q", s)
		}
	}
	for _, pr := range p.ProtocolNames() {
		if _, err := os.Stat(filepath.Join(dir, PlotFile(pr))); err != nil {
			t.Errorf("plot of %s: %v", pr, err)
		}
	}
	// Without the protocols the saved rows are another plan's: refused.
	p.LongText = nil
	_, err = run(t, p, dir, newCounter())
	wantErr(t, err, "hold rows and checkpoints of another configuration")
}
