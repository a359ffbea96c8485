package extrapstudy

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
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
	// EvalStart is called when an evaluation (one encoding of a model at
	// every length) starts, with its key ("rope-pi-seed1").
	EvalStart func(eval string)
}

// Options configures Run, RunJob and Render.
type Options struct {
	// Dir is the output directory (default runs/extrapolation/<preset>).
	Dir string
	// Redo lists the encodings (plan labels) whose models are trained and
	// evaluated again, the others being reused (study.Jobs.Redo).
	Redo []string
	// Progress receives the progress bars (nil: none); Log receives the
	// messages and the final table (nil: discarded).
	Progress, Log io.Writer
	// Command is the command line shown in table.md (default
	// "go run ./experiments/extrapolation -preset <preset>").
	Command string
	Hooks   Hooks
}

// Outcome describes what Run, RunJob or Render did.
type Outcome struct {
	Dir string
	// Trained counts the model jobs run by this call (trained or resumed,
	// then evaluated), Resumed those of them whose training continued from
	// a checkpoint, Reused the jobs whose saved rows were valid.
	Trained, Resumed, Reused int
	// Rows are the results of the plan found in Dir, in table order (not
	// set by RunJob).
	Rows []Row
	// Pending lists the model jobs of the plan without valid saved rows
	// when the outputs were rendered.
	Pending []string
	// Files are the rendered files.
	Files []string
	Wall  time.Duration
}

// String is the one-line summary of a run.
func (o *Outcome) String() string {
	return fmt.Sprintf("%d models trained and evaluated (%d resumed), %d reused, in %s", o.Trained, o.Resumed, o.Reused, o.Wall.Round(time.Second))
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
	plots, _ := filepath.Glob(filepath.Join(dir, PlotFile("*")))
	for _, f := range plots {
		if err := os.Remove(f); err != nil {
			return errors.Wrap(err, "cleaning the output directory")
		}
	}
	return nil
}

// renderLock is the lock file of the rendered files in the output
// directory (study.Jobs').
const renderLock = "render.lock"

// jobSpec is what the saved rows of a model job (results/<key>.json) were
// computed under: they are reused only while it is the same.
type jobSpec struct {
	Config      trainer.Config `json:"config"`
	CorpusBytes int            `json:"corpus_bytes"`
	CorpusCRC   uint32         `json:"corpus_crc32"`
	// Evals are the model's evaluations: encoding and factors.
	Evals      []evalSpec `json:"evals"`
	TextBytes  int        `json:"text_bytes"`
	TextCRC    uint32     `json:"text_crc32"`
	EvalTokens int        `json:"eval_tokens"`
	// Stream and LongText are the plan's (empty for the presets before
	// them, so their saved rows stay valid).
	Stream   bool     `json:"stream,omitempty"`
	LongText []string `json:"long_text,omitempty"`
}

// evalSpec is one evaluation of a model.
type evalSpec struct {
	Encoding string `json:"encoding"`
	Factors  []int  `json:"factors"`
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func corpusCRC(c *trainer.Corpus) (int, uint32) {
	crc := crc32.Update(crc32.Checksum(c.Train, crcTable), crcTable, c.Val)
	return len(c.Train) + len(c.Val), crc
}

// runner holds the state of one call.
type runner struct {
	plan    Plan
	c       *trainer.Corpus
	text    []byte
	opt     Options
	out     *Outcome
	corpus  struct{ n int }
	crc     uint32
	prov    trainer.ProvenanceInfo
	jobs    []ModelJob
	js      *study.Jobs[jobSpec, Row]
	started time.Time
}

// open validates everything and prepares the jobs; nothing is written.
func open(p Plan, c *trainer.Corpus, opt Options) (*runner, error) {
	opt.defaults(p)
	if err := p.Validate(c); err != nil {
		return nil, err
	}
	text, err := p.EvalText(c.Val)
	if err != nil {
		return nil, err
	}
	r := &runner{plan: p, c: c, text: text, opt: opt, out: &Outcome{Dir: opt.Dir}, prov: trainer.Provenance(),
		jobs: p.Jobs(), started: time.Now()}
	r.corpus.n, r.crc = corpusCRC(c)
	ropt := study.RunOptions{Dir: opt.Dir, Redo: opt.Redo, Progress: opt.Progress, Log: opt.Log, SaveEvery: p.SaveEvery}
	r.js = study.NewStudyJobs("extrapolation", ropt, r.jobs, r.spec,
		study.SameConfig(func(s *jobSpec) *trainer.Config { return &s.Config }), r.do, r.render)
	return r, nil
}

func (r *runner) spec(m ModelJob) (jobSpec, error) {
	s := jobSpec{Config: m.Cfg, CorpusBytes: r.corpus.n, CorpusCRC: r.crc, TextBytes: len(r.text),
		TextCRC: crc32.Checksum(r.text, crcTable), EvalTokens: r.plan.EvalTokens, Stream: r.plan.Stream}
	for _, pr := range r.plan.LongText {
		s.LongText = append(s.LongText, pr.String())
	}
	for _, j := range r.plan.EvalJobs(m) {
		s.Evals = append(s.Evals, evalSpec{Encoding: j.Encoding, Factors: j.Factors})
	}
	return s, nil
}

// Run carries out the study p on corpus c in one process: it validates the
// plan and the corpus (before anything is trained), then runs every model
// job without valid saved rows (study.Jobs: train, resuming from its
// checkpoint, then evaluate at each length with both protocols, and the
// RoPE scalings on the rope model), saving each checkpoint and each job's
// rows as it goes under opt.Dir, and finally renders the tables and plots
// (see Render). Work found done is reused, so a finished study only
// re-renders. A cancelled ctx or a hook error stops it with an error
// wrapping ErrInterrupted after saving the current checkpoint.
func Run(ctx context.Context, p Plan, c *trainer.Corpus, opt Options) (*Outcome, error) {
	r, err := open(p, c, opt)
	if err != nil {
		return nil, err
	}
	r.intro()
	rows, ran, reused, err := r.js.Run(ctx)
	r.out.Trained, r.out.Reused, r.out.Rows = ran, reused, rows
	r.out.Wall = time.Since(r.started)
	return r.out, err
}

// Jobs lists the independent jobs of the plan, in the order RunJob numbers
// them (0-based): one per trained model, holding its training and every
// evaluation of it (the model's own encoding at each length, and on the rope
// model the RoPE scalings). Jobs write disjoint files (models/<key>/ and
// results/<key>.json), so they can run at the same time in separate
// processes, on separate machines sharing the output directory.
func (p Plan) Jobs() []ModelJob { return p.ModelJobs() }

// RunJob runs job n of p.Jobs() (train the model unless trained, then its
// evaluations) unless its rows are saved, and renders nothing: Render
// merges whatever jobs have finished. The rows are those a single-process
// Run writes. An n outside the jobs is an error that gives their number.
func RunJob(ctx context.Context, p Plan, c *trainer.Corpus, opt Options, n int) (*Outcome, error) {
	r, err := open(p, c, opt)
	if err != nil {
		return nil, err
	}
	if n < 0 || n >= len(r.jobs) {
		return nil, errors.Errorf("job %d: the plan has %d jobs, numbered 0 to %d (list them with -jobs)", n, len(r.jobs), len(r.jobs)-1)
	}
	before := r.out.Trained
	err = r.js.RunJob(ctx, n)
	if err == nil && r.out.Trained == before {
		r.out.Reused = 1
	}
	r.out.Wall = time.Since(r.started)
	return r.out, err
}

// Render writes the results of plan p found in opt.Dir as results.csv,
// results.json, table.md and one PNG plot per protocol, without training or
// evaluating anything; model jobs not done yet show as pending. It
// validates p and c like Run (the corpus defines the evaluation text the
// results must match) and refuses, writing nothing, when saved rows were
// computed under another configuration (study.Jobs.RenderSaved).
func Render(p Plan, c *trainer.Corpus, opt Options) (*Outcome, error) {
	r, err := open(p, c, opt)
	if err != nil {
		return nil, err
	}
	rows, err := r.js.RenderSaved()
	r.out.Rows = rows
	return r.out, err
}

// intro logs the plan and the work to do.
func (r *runner) intro() {
	p := r.plan
	logw := r.opt.Log
	if p.Reduced != "" {
		fmt.Fprintf(logw, "%s preset: reduced for speed: %s.\n", p.Preset, p.Reduced)
	} else {
		fmt.Fprintf(logw, "%s preset\n", p.Preset)
	}
	fmt.Fprintf(logw, "encodings %s; seeds %v; L = %d, Le = %v; %d updates of batch %d\n",
		strings.Join(p.Encodings, ", "), p.Seeds, p.TrainLen(), p.Lengths(), p.Base.Steps, p.Base.Batch)
	fmt.Fprintf(logw, "corpus %s: %d training / %d validation bytes; evaluation text: %s\n",
		corpusName(r.c), len(r.c.Train), len(r.c.Val), r.textDesc())
	fmt.Fprintf(logw, "output %s: %d model jobs\n", r.opt.Dir, len(r.jobs))
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

// do is job m: train it with the engine (trainer.Run) from scratch or from
// its checkpoint ckpt to Steps updates (the engine saves the checkpoint
// every SaveEvery updates, at the end and on interruption), then evaluate
// it (every EvalJob) into its rows.
func (r *runner) do(ctx context.Context, m ModelJob, ckpt, tag string) ([]Row, error) {
	tag = fmt.Sprintf("%s %s", tag, m.Key())
	fmt.Fprintf(r.opt.Log, "%s training (%d updates)\n", tag, m.Cfg.Steps)
	opt := trainer.RunOptions{
		Ckpt:      ckpt,
		SaveEvery: r.plan.SaveEvery,
		NoEval:    true,
		Progress:  r.opt.Progress,
		OnStart: func(from int) {
			if from > 0 {
				r.out.Resumed++
				fmt.Fprintf(r.opt.Log, "%s resuming from update %d of %d\n", tag, from, m.Cfg.Steps)
			}
			if h := r.opt.Hooks.TrainStart; h != nil {
				h(m.Key(), from)
			}
		},
	}
	if h := r.opt.Hooks.BeforeStep; h != nil {
		opt.BeforeStep = func(step int) error { return h(m.Key(), step) }
	}
	r.out.Trained++
	sum, err := trainer.Run(ctx, m.Cfg, r.c, opt)
	if err != nil {
		return nil, errors.WithMessage(err, m.Key())
	}
	L := r.plan.TrainLen()
	base := Row{Preset: r.plan.Preset, Trained: m.Encoding, Model: m.Key(), Seed: m.Seed, TrainLen: L,
		GitRev: r.prov.GitRev, BLAS: r.prov.BLAS, GoVersion: r.prov.GoVersion, GitDirty: r.prov.Dirty, Machine: r.prov.Machine,
		TrainSteps: sum.Steps, TrainMsPerStep: study.TrainMs(ckpt), TrainLoss: study.LastLoss(ckpt)}
	if base.TrainMsPerStep > 0 {
		base.TrainTokensPerSec = float64(m.Cfg.Batch*L) * 1000 / base.TrainMsPerStep
	}
	fmt.Fprintf(r.opt.Log, "%s trained: %d updates, train loss %.4f bits/byte, %.0f ms/update, %.0f tokens/s\n", tag, sum.Steps,
		base.TrainLoss/math.Ln2, base.TrainMsPerStep, base.TrainTokensPerSec)
	params, _, err := trainer.LoadModel(ckpt)
	if err != nil {
		return nil, errors.WithMessagef(err, "evaluating %s", m.Key())
	}
	evals := r.plan.EvalJobs(m)
	var units int64
	for _, j := range evals {
		for _, f := range j.Factors {
			units += r.evalUnits(f * L)
			if j.Encoding == m.Encoding {
				for _, pr := range r.plan.LongText {
					units += r.protoUnits(pr)
				}
			}
		}
	}
	bar := trainer.Progress(nil)
	if r.opt.Progress != nil {
		bar = trainer.NewProgress(r.opt.Progress, units, tag+" evaluating")
		defer bar.Exit()
	}
	var rows []Row
	for _, j := range evals {
		rs, err := r.evaluate(ctx, tag, j, base, params, bar)
		if err != nil {
			return nil, err
		}
		rows = append(rows, rs...)
	}
	if bar != nil {
		bar.Finish()
	}
	return rows, nil
}

// evalUnits is the rough cost of scoring the text at le, in the units of
// the evaluation's progress bar: attention makes tokens of long windows
// dearer.
func (r *runner) evalUnits(le int) int64 {
	return int64(float64(len(r.text)-1) * max(1, float64(le)/float64(2*r.plan.Base.SeqLen)))
}

// protoUnits is the rough cost of scoring the text with long-text protocol
// pr, in the units of evalUnits.
func (r *runner) protoUnits(pr trainer.Protocol) int64 {
	u := r.evalUnits(pr.GraphLen(pr.Window))
	switch pr.Name {
	case trainer.ProtoStride:
		u = u * int64(pr.Window) / int64(pr.Stride)
	case trainer.ProtoSinks:
		u *= 4 // token by token
	}
	return u
}

// evaluate scores the trained model (params) under evaluation j at every
// factor with both protocols (and, for the model's own encoding, the
// plan's long-text protocols), and returns its rows (base gives the
// model's fields).
func (r *runner) evaluate(ctx context.Context, tag string, j EvalJob, base Row, params *graph.Params, bar trainer.Progress) ([]Row, error) {
	if h := r.opt.Hooks.EvalStart; h != nil {
		h(j.Key())
	}
	t0 := time.Now()
	L := r.plan.TrainLen()
	base.Encoding = j.Encoding
	lmax := j.Factors[len(j.Factors)-1] * L
	lastNs := []int{0, L} // the protocols, in the order of Protocols: every target, the last L of each window
	var rows []Row
	for _, f := range j.Factors {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%w: evaluation of %s stopped (%v); run the same command again to resume", ErrInterrupted, j.Key(), err)
		}
		le := f * L
		cfg := r.plan.EvalModel(j, le)
		if bar != nil {
			bar.Describe(fmt.Sprintf("%s eval %s Le=%d", tag, j.Encoding, le))
		}
		batch := max(1, r.plan.EvalTokens/le)
		var mem study.Memory
		if le == lmax {
			// Peak memory on a separate pass over the first batch (the
			// graph allocates its values on the first run), so the timed
			// pass below runs with the default GC.
			first := r.text[:min(batch*le+1, len(r.text))]
			mem = study.MeasureMemory(func() {
				trainer.ScoreText(params, cfg.Model, first, lastNs, trainer.EvalOptions{Len: le, Batch: batch})
			})
		}
		t1 := time.Now()
		scores, err := trainer.ScoreText(params, cfg.Model, r.text, lastNs, trainer.EvalOptions{Len: le, Batch: batch})
		dt := time.Since(t1)
		if bar != nil {
			bar.Add(r.evalUnits(le))
		}
		row := base
		row.EvalLen = le
		if j.Encoding != j.Model.Encoding {
			row.RopeScale = cfg.Model.PosOpts.RopeScale
		}
		switch {
		case errors.Is(err, posenc.ErrBeyondTable):
			row.Status = StatusNA
			row.Note = fmt.Sprintf("learned table has %d positions, Le = %d", cfg.Model.PosOpts.MaxLen, le)
			for _, p := range Protocols {
				row.Protocol = p
				rows = append(rows, row)
			}
		case err != nil:
			return nil, errors.WithMessagef(err, "evaluating %s at Le = %d", j.Key(), le)
		default:
			row.Status = StatusOK
			row.EvalMsPerToken = dt.Seconds() * 1000 / float64(scores[0].Tokens)
			if le == lmax {
				row.PeakHeapMB = float64(mem.PeakHeap) / (1 << 20)
				row.PeakRSSMB = float64(mem.PeakRSS) / (1 << 20)
				row.RSSSource = mem.RSSSource
				row.BaseHeapMB, row.BaseRSSMB = float64(mem.BaseHeap)/(1<<20), float64(mem.BaseRSS)/(1<<20)
			}
			for i, s := range scores {
				row.Protocol = Protocols[i]
				rows = append(rows, scoredRow(row, s))
			}
		}
		if j.Encoding == j.Model.Encoding {
			for _, pr := range r.plan.LongText {
				if bar != nil {
					bar.Describe(fmt.Sprintf("%s eval %s Le=%d %s", tag, j.Encoding, le, pr))
				}
				pro, err := r.evaluateProtocol(params, cfg, pr, le, le == lmax, row)
				if err != nil {
					return nil, errors.WithMessagef(err, "evaluating %s at Le = %d with protocol %s", j.Key(), le, pr)
				}
				rows = append(rows, pro)
				if bar != nil {
					bar.Add(r.protoUnits(pr))
				}
			}
		}
	}
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
	if bar != nil {
		bar.Clear()
	}
	fmt.Fprintf(r.opt.Log, "%s evaluated %s (bits/byte, all targets) %s in %s\n", tag, j.Encoding, strings.Join(cells, ", "),
		time.Since(t0).Round(100*time.Millisecond))
	return rows, nil
}

// scoredRow is row with the scores of s (bits per byte, perplexity, nats
// per target, windows, targets, every window's bits).
func scoredRow(row Row, s trainer.Score) Row {
	row.BitsPerByte, row.Perplexity, row.Nats = s.BitsPerByte(), s.Perplexity(), s.Nats/float64(s.Tokens)
	row.Windows, row.Tokens = s.Windows, s.Tokens
	row.WindowBits = make([]float32, len(s.WindowNats))
	for w, v := range s.WindowNats {
		row.WindowBits[w] = float32(v / math.Ln2)
	}
	return row
}

// protocolNA says why the model cfg cannot score documents of le tokens
// with pr ("" if it can): sinks needs incremental decoding, and a sliding
// cache an encoding whose cache can slide (not an absolute table) when
// the document exceeds the window; a learned table must cover the graph.
func protocolNA(cfg trainer.Config, pr trainer.Protocol, le int) string {
	if pr.Name == trainer.ProtoSinks {
		if err := layers.CanDecode(cfg.Model); err != nil {
			return err.Error()
		}
		if pr.Window < le {
			if err := layers.CanSlide(cfg.Model); err != nil {
				return err.Error()
			}
		}
		if err := layers.CheckDecodeWindow(cfg.Model, pr.Window); err != nil {
			return err.Error()
		}
	}
	return ""
}

// evaluateProtocol scores the evaluation text at le with long-text
// protocol pr (base: the row of the full context at le, whose scores it
// replaces), measuring the time per target and, if peak, the peak memory
// of its first batch.
func (r *runner) evaluateProtocol(params *graph.Params, cfg trainer.Config, pr trainer.Protocol, le int, peak bool, base Row) (Row, error) {
	row := base
	row.Protocol = pr.String()
	row.EvalMsPerToken, row.PeakHeapMB, row.PeakRSSMB, row.RSSSource, row.Note = 0, 0, 0, "", ""
	row.BaseHeapMB, row.BaseRSSMB = 0, 0
	if why := protocolNA(cfg, pr, le); why != "" {
		row.Status, row.Note = StatusNA, why
		return row, nil
	}
	// The protocols' graphs hold at most Memory+Window positions: they are
	// not streamed (the memory protocol's key padding is a run-time mask,
	// which CoPE's streamed attention does not take).
	cfg.Model.Stream = false
	batch := max(1, r.plan.EvalTokens/pr.GraphLen(le))
	opt := trainer.EvalOptions{Len: le, Batch: batch, Protocol: pr}
	if peak {
		first := r.text[:min(batch*le+1, len(r.text))]
		mem := study.MeasureMemory(func() { trainer.ScoreText(params, cfg.Model, first, []int{0}, opt) })
		row.PeakHeapMB, row.PeakRSSMB, row.RSSSource = float64(mem.PeakHeap)/(1<<20), float64(mem.PeakRSS)/(1<<20), mem.RSSSource
		row.BaseHeapMB, row.BaseRSSMB = float64(mem.BaseHeap)/(1<<20), float64(mem.BaseRSS)/(1<<20)
	}
	t0 := time.Now()
	scores, err := trainer.ScoreText(params, cfg.Model, r.text, []int{0}, opt)
	dt := time.Since(t0)
	if errors.Is(err, posenc.ErrBeyondTable) {
		row.Status, row.Note = StatusNA, err.Error()
		row.PeakHeapMB, row.PeakRSSMB, row.RSSSource, row.BaseHeapMB, row.BaseRSSMB = 0, 0, "", 0, 0
		return row, nil
	}
	if err != nil {
		return row, err
	}
	row.Status = StatusOK
	row.EvalMsPerToken = dt.Seconds() * 1000 / float64(scores[0].Tokens)
	return scoredRow(row, scores[0]), nil
}
