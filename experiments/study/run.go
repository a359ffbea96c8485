package study

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/posenc"
)

// ErrInterrupted is wrapped by the error Run returns when its context is
// cancelled or a hook stops it: what is finished is saved, and running the
// same study again resumes. It is the engine's trainer.ErrInterrupted.
var ErrInterrupted = trainer.ErrInterrupted

// Hooks let callers (tests) observe and interrupt a study.
type Hooks struct {
	// TrainStart is called when a training starts (from = 0) or resumes
	// from a checkpoint at update from.
	TrainStart func(model string, from int)
	// BeforeStep is called before update step (0-based) of a training; a
	// non-nil error interrupts the study as a cancelled context does: the
	// checkpoint is saved at step and Run returns an error wrapping
	// ErrInterrupted.
	BeforeStep func(model string, step int) error
	// EvalStart is called when an evaluation job starts.
	EvalStart func(job string)
}

// Options configures Run and Render.
type Options struct {
	// Dir is the output directory (default runs/extrapolation/<preset>).
	Dir string
	// Progress receives the progress bar (nil: none); Log receives the
	// messages and the final table (nil: discarded).
	Progress, Log io.Writer
	// GitRev is recorded in the rows (default trainer.Provenance().GitRev).
	GitRev string
	// Command is the command line shown in table.md (default
	// "go run ./experiments/extrapolation -preset <preset>").
	Command string
	Hooks   Hooks
}

// Outcome describes what Run or Render did.
type Outcome struct {
	Dir string
	// Trained counts the trainings run by this call, Resumed those of them
	// that continued from a checkpoint; SkippedModels the models already
	// trained (or whose evaluations were all done).
	Trained, Resumed, SkippedModels int
	// Evaluated counts the evaluation jobs run by this call, SkippedEvals
	// those found done.
	Evaluated, SkippedEvals int
	// Rows are the results of the plan found in Dir, in table order.
	Rows []Row
	// Pending counts the evaluation jobs of the plan without results.
	Pending int
	// Files are the rendered files.
	Files []string
	Wall  time.Duration
}

// DefaultDir is runs/extrapolation/<preset>.
func DefaultDir(preset string) string { return filepath.Join("runs", "extrapolation", preset) }

func (o *Options) defaults(p Plan) {
	if o.Dir == "" {
		o.Dir = DefaultDir(p.Preset)
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.GitRev == "" {
		o.GitRev = trainer.Provenance().GitRev
	}
	if o.Command == "" {
		o.Command = "go run ./experiments/extrapolation -preset " + p.Preset
	}
}

// Clean deletes what Run and Render write in dir (models/, results/, the
// rendered files), and nothing else. It refuses while another process
// trains, evaluates or renders in dir (its error names the holder).
func Clean(dir string) error {
	unlock, err := trainer.Lock(filepath.Join(dir, renderLock))
	if err != nil {
		return errors.WithMessage(err, "not cleaning the output directory")
	}
	defer unlock()
	locks, _ := filepath.Glob(filepath.Join(dir, "models", "*", "job.lock"))
	for _, l := range locks {
		u, err := trainer.Lock(l)
		if err != nil {
			return errors.WithMessage(err, "not cleaning the output directory")
		}
		defer u()
	}
	for _, n := range []string{"models", "results", FileCSV, FileJSON, FileTable} {
		if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
			return errors.Wrap(err, "cleaning the output directory")
		}
	}
	for _, pr := range Protocols {
		if err := os.RemoveAll(filepath.Join(dir, PlotFile(pr))); err != nil {
			return errors.Wrap(err, "cleaning the output directory")
		}
	}
	return nil
}

// renderLock is the lock file of the rendered files in the output
// directory.
const renderLock = "render.lock"

// trainSpec identifies a training: a saved model is reused only if its spec
// is the same.
type trainSpec struct {
	Config      trainer.Config `json:"config"`
	CorpusBytes int            `json:"corpus_bytes"`
	CorpusCRC   uint32         `json:"corpus_crc32"`
}

// trainState is models/<key>/train.json, written after every checkpoint.
type trainState struct {
	Spec trainSpec `json:"spec"`
	// Step is the number of updates of the checkpoint; Done is set when it
	// reached Config.Steps.
	Step int  `json:"step"`
	Done bool `json:"done"`
	// TrainSeconds is the time spent in updates over TimedSteps updates
	// (summed over sessions).
	TrainSeconds float64 `json:"train_seconds"`
	TimedSteps   int     `json:"timed_steps"`
	// LastLosses are the training losses of the last (up to 10) updates.
	LastLosses []float64 `json:"last_losses"`
	GitRev     string    `json:"git_rev"`
	// CkptSHA256 is the SHA-256 of the checkpoint of Step ("" in files of
	// earlier versions); a finished model's checkpoint must still have it.
	CkptSHA256 string `json:"ckpt_sha256,omitempty"`
}

// evalSpec identifies an evaluation job.
type evalSpec struct {
	Train      trainSpec `json:"train"`
	Encoding   string    `json:"encoding"`
	Factors    []int     `json:"factors"`
	TextBytes  int       `json:"text_bytes"`
	TextCRC    uint32    `json:"text_crc32"`
	EvalTokens int       `json:"eval_tokens"`
}

// evalFile is results/<key>.json.
type evalFile struct {
	Spec    evalSpec `json:"spec"`
	Rows    []Row    `json:"rows"`
	Seconds float64  `json:"seconds"`
}

func sameSpec(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

func corpusCRC(c *trainer.Corpus) (int, uint32) {
	crc := crc32.Update(crc32.Checksum(c.Train, crcTable), crcTable, c.Val)
	return len(c.Train) + len(c.Val), crc
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// runner holds the state of one Run.
type runner struct {
	plan   Plan
	c      *trainer.Corpus
	text   []byte
	opt    Options
	out    *Outcome
	corpus struct {
		n   int
		crc uint32
	}
	prov  trainer.ProvenanceInfo
	bar   trainer.Progress // nil until the work is known
	total int64
	done  int64
}

func (r *runner) modelDir(m ModelJob) string { return filepath.Join(r.opt.Dir, "models", m.Key()) }
func (r *runner) ckptPath(m ModelJob) string {
	return filepath.Join(r.modelDir(m), "ckpt.safetensors")
}
func (r *runner) statePath(m ModelJob) string { return filepath.Join(r.modelDir(m), "train.json") }
func (r *runner) lockPath(m ModelJob) string  { return filepath.Join(r.modelDir(m), "job.lock") }
func (r *runner) evalPath(j EvalJob) string {
	return filepath.Join(r.opt.Dir, "results", j.Key()+".json")
}

func (r *runner) trainSpec(m ModelJob) trainSpec {
	return trainSpec{Config: m.Cfg, CorpusBytes: r.corpus.n, CorpusCRC: r.corpus.crc}
}

func (r *runner) evalSpec(j EvalJob) evalSpec {
	return evalSpec{Train: r.trainSpec(j.Model), Encoding: j.Encoding, Factors: j.Factors, TextBytes: len(r.text),
		TextCRC: crc32.Checksum(r.text, crcTable), EvalTokens: r.plan.EvalTokens}
}

// newRunner validates everything and prepares the paths; nothing is
// written.
func newRunner(p Plan, c *trainer.Corpus, opt Options) (*runner, error) {
	opt.defaults(p)
	if err := p.Validate(c); err != nil {
		return nil, err
	}
	text, err := p.EvalText(c.Val)
	if err != nil {
		return nil, err
	}
	r := &runner{plan: p, c: c, text: text, opt: opt, out: &Outcome{Dir: opt.Dir}}
	r.corpus.n, r.corpus.crc = corpusCRC(c)
	r.prov = trainer.Provenance()
	return r, nil
}

// loadEval returns the results of j if they are on disk; an error if they
// were computed with another configuration.
func (r *runner) loadEval(j EvalJob) (*evalFile, error) {
	var f evalFile
	err := readJSON(r.evalPath(j), &f)
	if os.IsNotExist(errors.Cause(err)) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !sameSpec(f.Spec, r.evalSpec(j)) {
		return nil, errors.Errorf("%s holds results of a different configuration, corpus or evaluation text than this study asks for; run with -fresh to start over, or choose another -out directory",
			r.evalPath(j))
	}
	return &f, nil
}

// loadState returns the training state of m, nil if there is none.
func (r *runner) loadState(m ModelJob) (*trainState, error) {
	var s trainState
	err := readJSON(r.statePath(m), &s)
	if os.IsNotExist(errors.Cause(err)) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !sameSpec(s.Spec, r.trainSpec(m)) {
		return nil, errors.Errorf("%s was trained with a different configuration or corpus than this study asks for; run with -fresh to start over, or choose another -out directory",
			r.modelDir(m))
	}
	return &s, nil
}

// modelWork is what remains to do for one model.
type modelWork struct {
	job     ModelJob
	state   *trainState
	train   bool // the training must run or continue
	pending []EvalJob
}

func (r *runner) trainUnits() int64 { return int64(3 * r.plan.Base.Batch * r.plan.Base.SeqLen) }

// evalUnits is the rough cost of scoring the text at le, in the units of
// the progress bar (a training step costs 3·B·L): attention makes tokens of
// long windows dearer.
func (r *runner) evalUnits(le int) int64 {
	return int64(float64(len(r.text)-1) * max(1, float64(le)/float64(2*r.plan.Base.SeqLen)))
}

// Run carries out the study p on corpus c in one process: it validates the plan and the
// corpus (before anything is trained), trains every (encoding, seed) model
// that is not trained yet (resuming from its checkpoint), evaluates every
// model at each length with both protocols (and the RoPE scalings on the
// rope model), saving each checkpoint and result as it goes under opt.Dir,
// and finally renders the tables and plots (see Render). Work found done is
// skipped, so a finished study only re-renders. A cancelled ctx or a hook
// error stops it with an error wrapping ErrInterrupted after saving the
// current checkpoint.
func Run(ctx context.Context, p Plan, c *trainer.Corpus, opt Options) (*Outcome, error) {
	start := time.Now()
	r, err := newRunner(p, c, opt)
	if err != nil {
		return nil, err
	}
	if err := r.runJobs(ctx, p.ModelJobs()); err != nil {
		return r.out, err
	}
	if err := r.render(); err != nil {
		return r.out, err
	}
	r.out.Wall = time.Since(start)
	return r.out, nil
}

// Jobs lists the independent jobs of the plan, in the order RunJob numbers
// them (0-based): one per trained model, holding its training and every
// evaluation of it (the model's own encoding at each length, and on the rope
// model the RoPE scalings). Jobs write disjoint files (models/<key>/ and
// results/<eval key>.json), so they can run at the same time in separate
// processes, on separate machines sharing the output directory.
func (p Plan) Jobs() []ModelJob { return p.ModelJobs() }

// RunJob runs job n of p.Jobs() (train the model unless trained, then its
// pending evaluations) and renders nothing: Render merges whatever jobs have
// finished. The rows are those a single-process Run writes. An n outside
// the jobs is an error that gives their number.
func RunJob(ctx context.Context, p Plan, c *trainer.Corpus, opt Options, n int) (*Outcome, error) {
	start := time.Now()
	r, err := newRunner(p, c, opt)
	if err != nil {
		return nil, err
	}
	jobs := p.Jobs()
	if n < 0 || n >= len(jobs) {
		return nil, errors.Errorf("job %d: the plan has %d jobs, numbered 0 to %d (list them with -jobs)", n, len(jobs), len(jobs)-1)
	}
	if err := r.runJobs(ctx, jobs[n:n+1]); err != nil {
		return r.out, err
	}
	r.out.Wall = time.Since(start)
	return r.out, nil
}

// runJobs trains and evaluates the model jobs given, skipping what is done.
func (r *runner) runJobs(ctx context.Context, jobs []ModelJob) error {
	p := r.plan
	logw := r.opt.Log
	// Find what is done; a configuration mismatch is an error before any
	// work.
	var work []modelWork
	for _, m := range jobs {
		w, done, err := r.findWork(m)
		if err != nil {
			return err
		}
		r.out.SkippedEvals += done
		if len(w.pending) == 0 || !w.train {
			r.out.SkippedModels++
		}
		if len(w.pending) > 0 {
			work = append(work, w)
		}
	}

	if p.Reduced != "" {
		fmt.Fprintf(logw, "%s preset: reduced for speed: %s.\n", p.Preset, p.Reduced)
	} else {
		fmt.Fprintf(logw, "%s preset\n", p.Preset)
	}
	nTrain, nEval := 0, 0
	for _, w := range work {
		if w.train {
			nTrain++
			from := 0
			if w.state != nil {
				from = w.state.Step
			}
			r.total += int64(p.Base.Steps-from) * r.trainUnits()
		}
		for _, j := range w.pending {
			nEval++
			for _, f := range j.Factors {
				r.total += r.evalUnits(f * p.Base.SeqLen)
			}
		}
	}
	fmt.Fprintf(logw, "encodings %s; seeds %v; L = %d, Le = %v; %d updates of batch %d\n",
		strings.Join(p.Encodings, ", "), p.Seeds, p.TrainLen(), p.Lengths(), p.Base.Steps, p.Base.Batch)
	fmt.Fprintf(logw, "corpus %s: %d training / %d validation bytes; evaluation text: %s\n",
		corpusName(r.c), len(r.c.Train), len(r.c.Val), r.textDesc())
	fmt.Fprintf(logw, "output %s: %d trainings and %d evaluations to run, %d models and %d evaluations already done\n",
		r.opt.Dir, nTrain, nEval, r.out.SkippedModels, r.out.SkippedEvals)

	if r.total > 0 && r.opt.Progress != nil {
		r.bar = trainer.NewProgress(r.opt.Progress, r.total, "starting")
	}
	for i, w := range work {
		tag := fmt.Sprintf("[%d/%d %s]", i+1, len(work), w.job.Key())
		if err := r.runModel(ctx, tag, w.job); err != nil {
			r.stopBar()
			return err
		}
	}
	r.finishBar()
	return nil
}

// findWork returns what remains to do for model m, and how many of its
// evaluations are done. A result or training state of another
// configuration is an error.
func (r *runner) findWork(m ModelJob) (w modelWork, done int, err error) {
	w.job = m
	for _, j := range r.plan.EvalJobs(m) {
		f, err := r.loadEval(j)
		if err != nil {
			return w, 0, err
		}
		if f == nil {
			w.pending = append(w.pending, j)
		} else {
			done++
		}
	}
	if w.state, err = r.loadState(m); err != nil {
		return w, 0, err
	}
	w.train = w.state == nil || !w.state.Done
	ck := r.ckptPath(m)
	_, serr := os.Stat(ck)
	if !w.train && len(w.pending) > 0 && serr != nil {
		r.logf("%s: checkpoint missing, training again\n", m.Key())
		w.state, w.train = nil, true
	}
	if serr == nil && (w.train || len(w.pending) > 0) {
		// A checkpoint to resume or to evaluate must be intact: a
		// finished model's the one recorded in train.json (a running one
		// may be ahead of train.json, so only its CRC is checked).
		sum := ""
		if w.state != nil && w.state.Done {
			sum = w.state.CkptSHA256
		}
		if verr := VerifyCkpt(ck, sum); verr != nil {
			bad := ck + ".bad"
			r.logf("%s: %v; moved to %s, training again\n", m.Key(), verr, bad)
			if err := os.Rename(ck, bad); err != nil {
				return w, 0, err
			}
			w.state, w.train = nil, true
		}
	}
	return w, done, nil
}

// runModel does the work of model m under its lock (models/<key>/job.lock),
// so that two processes never write the same model's files: a second one
// gets an error naming the holder. What is done is read again under the
// lock, since another process may have finished it meanwhile.
func (r *runner) runModel(ctx context.Context, tag string, m ModelJob) error {
	unlock, err := trainer.Lock(r.lockPath(m))
	if err != nil {
		if errors.Is(err, trainer.ErrLocked) {
			return errors.WithMessagef(err, "%s is being trained or evaluated by another process", m.Key())
		}
		return errors.WithMessagef(err, "%s", m.Key())
	}
	defer unlock()
	w, _, err := r.findWork(m)
	if err != nil {
		return err
	}
	st := w.state
	if w.train {
		if st, err = r.train(ctx, tag, m, st); err != nil {
			return err
		}
	}
	for _, j := range w.pending {
		if err := r.evaluate(ctx, tag, j, st); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) finishBar() {
	if r.bar != nil {
		r.bar.Finish()
		r.bar = nil
	}
}

// stopBar leaves the bar where it is, on a new line.
func (r *runner) stopBar() {
	if r.bar != nil {
		r.bar.Exit()
		r.bar = nil
	}
}

func (r *runner) describe(s string) {
	if r.bar != nil {
		r.bar.Describe(s)
	}
}

func (r *runner) add(n int64) {
	r.done += n
	if r.bar != nil {
		r.bar.Add(n)
	}
}

// logf prints a message above the progress bar.
func (r *runner) logf(format string, args ...any) {
	if r.bar != nil {
		r.bar.Clear()
	}
	fmt.Fprintf(r.opt.Log, format, args...)
}

func corpusName(c *trainer.Corpus) string {
	if c.Path == "" {
		return "(in memory)"
	}
	return c.Path
}

// textDesc describes the evaluation text.
func (r *runner) textDesc() string {
	lmax := r.plan.Lengths()[len(r.plan.Factors)-1]
	whole := "the whole"
	if len(r.text) < len(r.c.Val) {
		whole = fmt.Sprintf("the first %d bytes of the", len(r.text))
	}
	return fmt.Sprintf("%s %d-byte validation split: %d targets at every length (%d windows of %d bytes at the longest length, %d of them whole)",
		whole, len(r.c.Val), len(r.text)-1, trainer.ScoreWindows(len(r.text), lmax), lmax, trainer.Windows(len(r.text), lmax))
}

// train trains m with the engine (trainer.Run) from scratch or from its
// checkpoint to Steps updates: the engine saves the checkpoint every
// SaveEvery updates, at the end and on interruption, and after each save
// the study writes its state (train.json).
func (r *runner) train(ctx context.Context, tag string, m ModelJob, st *trainState) (*trainState, error) {
	ck := r.ckptPath(m)
	if st == nil || st.Step == 0 {
		st = &trainState{Spec: r.trainSpec(m)}
	}
	units := r.trainUnits()
	tokens := float64(m.Cfg.Batch * m.Cfg.SeqLen)
	writeState := func(step int) error {
		st.Step, st.Done, st.GitRev = step, step >= m.Cfg.Steps, r.opt.GitRev
		var err error
		if st.CkptSHA256, err = fileSHA256(ck); err != nil {
			return err
		}
		return writeJSON(r.statePath(m), st)
	}
	opt := trainer.RunOptions{
		Ckpt:      ck,
		SaveEvery: r.plan.SaveEvery,
		NoEval:    true,
		OnStart: func(from int) {
			if from > 0 {
				r.out.Resumed++
				r.logf("%s resuming from update %d of %d\n", tag, from, m.Cfg.Steps)
			} else {
				st = &trainState{Spec: r.trainSpec(m)} // a checkpoint-less start discards old timings
			}
			st.Step = from
			if h := r.opt.Hooks.TrainStart; h != nil {
				h(m.Key(), from)
			}
		},
		OnStep: func(res trainer.StepResult) {
			st.TrainSeconds += res.Seconds
			st.TimedSteps++
			st.LastLosses = append(st.LastLosses, res.Loss)
			if n := len(st.LastLosses); n > 10 {
				st.LastLosses = append([]float64(nil), st.LastLosses[n-10:]...)
			}
			r.describe(fmt.Sprintf("%s train %d/%d loss %.3f bits/byte %.0f tok/s", tag, res.Step, m.Cfg.Steps, res.Loss/math.Ln2,
				float64(st.TimedSteps)*tokens/st.TrainSeconds))
			r.add(units)
		},
		OnSave: writeState,
	}
	if h := r.opt.Hooks.BeforeStep; h != nil {
		opt.BeforeStep = func(step int) error { return h(m.Key(), step) }
	}
	r.out.Trained++
	sum, err := trainer.Run(ctx, m.Cfg, r.c, opt)
	if err != nil {
		return nil, errors.WithMessage(err, m.Key())
	}
	if !st.Done { // resumed from a finished checkpoint: nothing was saved
		if err := writeState(sum.Steps); err != nil {
			return nil, err
		}
	}
	r.logf("%s trained: %d updates, train loss %.4f bits/byte, %.0f ms/update, %.0f tokens/s\n", tag, sum.Steps, mean(st.LastLosses)/math.Ln2,
		1000*st.TrainSeconds/float64(max(st.TimedSteps, 1)), float64(st.TimedSteps)*tokens/max(st.TrainSeconds, 1e-9))
	return st, nil
}

func mean(v []float64) float64 {
	m, _ := MeanStd(v)
	return m
}

// evaluate runs one evaluation job on the saved model and writes its rows.
func (r *runner) evaluate(ctx context.Context, tag string, j EvalJob, st *trainState) error {
	if h := r.opt.Hooks.EvalStart; h != nil {
		h(j.Key())
	}
	t0 := time.Now()
	params, _, err := trainer.LoadModel(r.ckptPath(j.Model))
	if err != nil {
		return errors.WithMessagef(err, "evaluating %s", j.Key())
	}
	L := r.plan.TrainLen()
	base := Row{Preset: r.plan.Preset, Encoding: j.Encoding, Trained: j.Model.Encoding, Model: j.Model.Key(),
		Seed: j.Model.Seed, TrainLen: L, GitRev: r.opt.GitRev, BLAS: r.prov.BLAS, GoVersion: r.prov.GoVersion, GitDirty: r.prov.Dirty}
	if st != nil {
		base.TrainSteps = st.Step
		if st.TimedSteps > 0 {
			base.TrainMsPerStep = 1000 * st.TrainSeconds / float64(st.TimedSteps)
			base.TrainTokensPerSec = float64(st.TimedSteps*j.Model.Cfg.Batch*L) / st.TrainSeconds
		}
		base.TrainLoss = mean(st.LastLosses)
	}
	lmax := j.Factors[len(j.Factors)-1] * L
	lastNs := []int{0, L} // the protocols, in the order of Protocols: every target, the last L of each window
	var rows []Row
	for _, f := range j.Factors {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: evaluation of %s stopped (%v); run the same command again to resume", ErrInterrupted, j.Key(), err)
		}
		le := f * L
		cfg := r.plan.EvalModel(j, le)
		r.describe(fmt.Sprintf("%s eval %s Le=%d", tag, j.Encoding, le))
		batch := max(1, r.plan.EvalTokens/le)
		var mem Memory
		if le == lmax {
			// Peak memory on a separate pass over the first batch (the
			// graph allocates its values on the first run), so the timed
			// pass below runs with the default GC.
			first := r.text[:min(batch*le+1, len(r.text))]
			mem = MeasureMemory(func() {
				trainer.ScoreText(params, cfg.Model, first, lastNs, trainer.EvalOptions{Len: le, Batch: batch})
			})
		}
		t1 := time.Now()
		scores, err := trainer.ScoreText(params, cfg.Model, r.text, lastNs, trainer.EvalOptions{Len: le, Batch: batch})
		dt := time.Since(t1)
		r.add(r.evalUnits(le))
		row := base
		row.EvalLen = le
		if j.Encoding != j.Model.Encoding {
			row.RopeScale = cfg.Model.PosOpts.RopeScale
		}
		if errors.Is(err, posenc.ErrBeyondTable) {
			row.Status = StatusNA
			row.Note = fmt.Sprintf("learned table has %d positions, Le = %d", cfg.Model.PosOpts.MaxLen, le)
			for _, p := range Protocols {
				row.Protocol = p
				rows = append(rows, row)
			}
			continue
		}
		if err != nil {
			return errors.WithMessagef(err, "evaluating %s at Le = %d", j.Key(), le)
		}
		row.Status = StatusOK
		row.EvalMsPerToken = dt.Seconds() * 1000 / float64(scores[0].Tokens)
		if le == lmax {
			row.PeakHeapMB = float64(mem.PeakHeap) / (1 << 20)
			row.PeakRSSMB = float64(mem.PeakRSS) / (1 << 20)
			row.RSSSource = mem.RSSSource
		}
		for i, s := range scores {
			row.Protocol = Protocols[i]
			row.BitsPerByte, row.Perplexity, row.Nats = s.BitsPerByte(), s.Perplexity(), s.Nats/float64(s.Tokens)
			row.Windows, row.Tokens = s.Windows, s.Tokens
			rows = append(rows, row)
		}
	}
	f := evalFile{Spec: r.evalSpec(j), Rows: rows, Seconds: time.Since(t0).Seconds()}
	if err := writeJSON(r.evalPath(j), f); err != nil {
		return err
	}
	r.out.Evaluated++
	var cells []string
	for _, row := range rows {
		if row.Protocol == ProtocolAll {
			if row.Status == StatusNA {
				cells = append(cells, fmt.Sprintf("%d: n/a", row.EvalLen))
			} else {
				cells = append(cells, fmt.Sprintf("%d: %.3f", row.EvalLen, row.BitsPerByte))
			}
		}
	}
	r.logf("%s evaluated %s (bits/byte, all targets) %s in %s\n", tag, j.Encoding, strings.Join(cells, ", "),
		time.Since(t0).Round(100*time.Millisecond))
	return nil
}
