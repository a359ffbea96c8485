package ftstudy

import (
	"context"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/corpora"
	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// Options configures Run (study.RunOptions).
type Options = study.RunOptions

// DefaultDir is runs/finetune/<preset>.
func DefaultDir(preset string) string { return filepath.Join("runs", "finetune", preset) }

// Row is one score: one fine-tuned entry and seed, after FTSteps updates
// (0: the source model with the entry's configuration), at EvalLen.
type Row struct {
	Preset string `json:"preset"`
	// Entry is the fine-tuned encoding, Base the source model's.
	Entry   string `json:"entry"`
	Base    string `json:"base"`
	Seed    int64  `json:"seed"`
	FTLen   int    `json:"ft_len"`
	FTSteps int    `json:"ft_steps"`
	EvalLen int    `json:"eval_len"`
	Status  string `json:"status"`
	Note    string `json:"note,omitempty"`
	// BitsPerByte is the mean over the scored targets (every target of the
	// non-overlapping windows of EvalLen); Nats the same in nats per
	// target; WindowBits each window's bits per byte (paired comparisons
	// over windows; not in results.csv).
	BitsPerByte float64   `json:"bits_per_byte"`
	Nats        float64   `json:"nats_per_target"`
	Windows     int       `json:"windows"`
	Tokens      int       `json:"tokens"`
	WindowBits  []float32 `json:"window_bits,omitempty"`
	// RopeScale and RopeTrainLen are the fine-tuning's (for the RoPE
	// scalings; 0 otherwise).
	RopeScale    float64 `json:"rope_scale,omitempty"`
	RopeTrainLen int     `json:"rope_train_len,omitempty"`
	// Training: the fine-tuning's wall ms per update and loss (nats, mean
	// of its last 10 updates); the scoring's ms per target.
	TrainMsPerStep float64 `json:"train_ms_per_step"`
	TrainLoss      float64 `json:"train_loss"`
	EvalMsPerToken float64 `json:"eval_ms_per_token"`
	// SourceSHA256 is the hash of the source checkpoint.
	SourceSHA256 string `json:"source_sha256"`
	BLAS         string `json:"blas"`
	GoVersion    string `json:"go_version"`
	GitRev       string `json:"git_rev"`
	GitDirty     bool   `json:"git_dirty"`
	Machine      string `json:"machine"`
}

// Status values.
const (
	StatusOK = "ok"
	StatusNA = "n/a"
)

// spec is what a job's saved rows must agree on to be reused.
type spec struct {
	Config       trainer.Config `json:"config"`
	SourceSHA256 string         `json:"source_sha256"`
	Steps        []int          `json:"steps"`
	EvalLens     []int          `json:"eval_lens"`
	TextBytes    int            `json:"text_bytes"`
	TextCRC      uint32         `json:"text_crc32"`
	EvalTokens   int            `json:"eval_tokens"`
	Stream       bool           `json:"stream"`
}

// Outcome is what Run produced.
type Outcome = study.JobsOutcome[Row]

type runner struct {
	plan Plan
	opt  Options
	c    *trainer.Corpus
	text []byte
	prov trainer.ProvenanceInfo
}

func newRunner(p Plan, opt Options) (*runner, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	c, err := corpora.Open(p.Source.Corpus)
	if err != nil {
		return nil, err
	}
	if err := c.CheckWindow(p.Len); err != nil {
		return nil, err
	}
	text, err := p.EvalText(c.Val)
	if err != nil {
		return nil, errors.WithMessagef(err, "corpus %s", c.Path)
	}
	return &runner{plan: p, opt: opt.WithDefaults(DefaultDir(p.Preset)), c: c, text: text, prov: trainer.Provenance()}, nil
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func (r *runner) spec(j Job) (spec, error) {
	cfg, err := r.plan.Config(j)
	if err != nil {
		return spec{}, err
	}
	s := spec{Config: cfg, Steps: r.plan.Steps, EvalLens: r.plan.EvalLens, TextBytes: len(r.text),
		TextCRC: crc32.Checksum(r.text, crcTable), EvalTokens: r.plan.EvalTokens, Stream: r.plan.Stream}
	// The source's hash, if it exists: rows of another source are not reused.
	if sum, err := study.FileSHA256(r.plan.SourceCkpt(j)); err == nil {
		s.SourceSHA256 = sum
	}
	return s, nil
}

// sameSpec compares specs with their resolved configurations. A source
// checkpoint that is absent now (a fresh clone holds the committed rows,
// not the models) leaves the rows valid; one that is present must be the
// one they came from.
func sameSpec(saved, now spec) bool {
	if now.SourceSHA256 == "" {
		saved.SourceSHA256 = ""
	}
	return sameConfig(saved, now)
}

var sameConfig = study.SameConfig(func(s *spec) *trainer.Config { return &s.Config })

// Run fine-tunes and scores every job of the plan without saved rows
// (resuming interrupted fine-tunings from their checkpoints), then writes
// results.csv, results.json, table.md and finetune.png under the output
// directory. A source model that is missing or not trained to the end is
// an error naming the command that trains it.
func Run(ctx context.Context, p Plan, opt Options) (*Outcome, error) { return opener(p, opt).Run(ctx) }

// RunJob runs job n (0-based, as Plan.Jobs lists them) without rendering.
func RunJob(ctx context.Context, p Plan, opt Options, n int) error {
	return opener(p, opt).RunJob(ctx, n)
}

// Render rewrites the tables and plot from the saved rows.
func Render(p Plan, opt Options) ([]Row, error) { return opener(p, opt).Render() }

func opener(p Plan, opt Options) study.Opener[spec, Row] {
	return func() (*study.Jobs[spec, Row], error) {
		r, err := newRunner(p, opt)
		if err != nil {
			return nil, err
		}
		return study.NewStudyJobs("finetune", r.opt, p.Jobs(), r.spec, sameSpec, r.runJob, r.render), nil
	}
}

// source loads job j's source checkpoint, checking that it is the source
// plan's model, trained to its end, on this corpus, and returns it with its
// path (the source study's, or with TrainSources one trained here when
// that is missing) and SHA-256.
func (r *runner) source(ctx context.Context, j Job) (*trainer.Checkpoint, string, string, error) {
	path := r.plan.SourceCkpt(j)
	want := r.plan.Source.Config(Base(j.Entry), j.Seed)
	train := fmt.Sprintf("go run ./experiments/extrapolation -preset %s -out %s (job %s), or fine-tune with -train-sources", r.plan.Source.Preset, r.plan.From, r.plan.SourceKey(j))
	if _, err := os.Stat(path); err != nil {
		if !r.plan.TrainSources {
			return nil, "", "", errors.Errorf("%s: the source model %s is not trained: %s", j.Key(), path, train)
		}
		path = filepath.Join(r.opt.Dir, "sources", r.plan.SourceKey(j), "ckpt.safetensors")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, "", "", err
		}
		r.opt.Logf("%s: %s has no checkpoint of %s: training it into %s (%d updates)\n", j.Key(), r.plan.From, r.plan.SourceKey(j), path, want.Steps)
		if _, err := trainer.Run(ctx, want, r.c, trainer.RunOptions{Ckpt: path, SaveEvery: r.plan.Source.SaveEvery, NoEval: true,
			Progress: r.opt.Progress, Log: r.opt.Log}); err != nil {
			return nil, "", "", errors.WithMessagef(err, "%s: training the source model %s", j.Key(), r.plan.SourceKey(j))
		}
	}
	ck, err := trainer.LoadCheckpoint(path)
	if err != nil {
		return nil, "", "", errors.WithMessagef(err, "%s: source model", j.Key())
	}
	if err := want.Resolved().Mismatch(ck.Config); err != nil {
		return nil, "", "", errors.WithMessagef(err, "%s: source model %s is not the %s preset's", j.Key(), path, r.plan.Source.Preset)
	}
	if ck.Step < want.Steps {
		return nil, "", "", errors.Errorf("%s: the source model %s is at update %d of %d: finish it first: %s", j.Key(), path, ck.Step, want.Steps, train)
	}
	if ck.CorpusHash != "" && ck.CorpusHash != r.c.Hash() {
		return nil, "", "", errors.Errorf("%s: the source model %s was trained on data with SHA-256 %s; the corpus %s has %s",
			j.Key(), path, ck.CorpusHash, r.c.Path, r.c.Hash())
	}
	sum, err := study.FileSHA256(path)
	return ck, path, sum, err
}

// runJob fine-tunes (or resumes, from ckpt) job j from its source model,
// keeping the checkpoints of Steps, and scores the source and each kept
// model at every length.
func (r *runner) runJob(ctx context.Context, j Job, ckpt, tag string) ([]Row, error) {
	tag = fmt.Sprintf("%s %s", tag, j.Key())
	_, src, srcSum, err := r.source(ctx, j)
	if err != nil {
		return nil, err
	}
	cfg, err := r.plan.Config(j)
	if err != nil {
		return nil, err
	}
	r.opt.Logf("%s fine-tuning from %s at L = %d (%d updates)\n", tag, src, cfg.SeqLen, cfg.Steps)
	keep := r.plan.Steps[:len(r.plan.Steps)-1]
	if _, err := trainer.Run(ctx, cfg, r.c, trainer.RunOptions{Ckpt: ckpt, InitFrom: src, KeepAt: keep,
		SaveEvery: r.opt.SaveEvery, NoEval: true, Progress: r.opt.Progress, Log: r.opt.Log}); err != nil {
		return nil, errors.WithMessage(err, j.Key())
	}
	base := Row{Preset: r.plan.Preset, Entry: j.Entry, Base: Base(j.Entry), Seed: j.Seed, FTLen: cfg.SeqLen,
		TrainMsPerStep: study.TrainMs(ckpt), TrainLoss: study.LastLoss(ckpt), SourceSHA256: srcSum,
		BLAS: r.prov.BLAS, GoVersion: r.prov.GoVersion, GitRev: r.prov.GitRev, GitDirty: r.prov.Dirty, Machine: r.prov.Machine}
	if j.Entry != Base(j.Entry) {
		base.RopeScale, base.RopeTrainLen = cfg.Model.PosOpts.RopeScale, cfg.Model.PosOpts.RopeTrainLen
	}
	models := []struct {
		steps int
		path  string
	}{{0, src}}
	for _, s := range keep {
		models = append(models, struct {
			steps int
			path  string
		}{s, trainer.KeepPath(ckpt, s)})
	}
	models = append(models, struct {
		steps int
		path  string
	}{r.plan.LastStep(), ckpt})
	model := r.plan.EvalModel(cfg).Model
	var rows []Row
	for _, m := range models {
		params, _, err := trainer.LoadModel(m.path)
		if err != nil {
			return nil, errors.WithMessagef(err, "%s after %d updates", j.Key(), m.steps)
		}
		for _, le := range r.plan.EvalLens {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("%w: scoring %s stopped (%v); run the same command again to resume", trainer.ErrInterrupted, j.Key(), err)
			}
			row, err := r.score(params, model, le, base)
			if err != nil {
				return nil, errors.WithMessagef(err, "scoring %s after %d updates at %d", j.Key(), m.steps, le)
			}
			row.FTSteps = m.steps
			rows = append(rows, row)
		}
		r.opt.Logf("%s after %d updates: %s\n", tag, m.steps, cellsLine(rows[len(rows)-len(r.plan.EvalLens):]))
	}
	return rows, nil
}

// score scores the evaluation text at le with params under model.
func (r *runner) score(params *graph.Params, model layers.Config, le int, base Row) (Row, error) {
	row := base
	row.EvalLen = le
	t0 := time.Now()
	s, err := trainer.ScoreText(params, model, r.text, []int{0}, trainer.EvalOptions{Len: le, Batch: max(1, r.plan.EvalTokens/le)})
	if err != nil {
		return row, err
	}
	row.Status = StatusOK
	row.EvalMsPerToken = time.Since(t0).Seconds() * 1000 / float64(s[0].Tokens)
	row.BitsPerByte, row.Nats = s[0].BitsPerByte(), s[0].Nats/float64(s[0].Tokens)
	row.Windows, row.Tokens = s[0].Windows, s[0].Tokens
	row.WindowBits = make([]float32, len(s[0].WindowNats))
	for w, v := range s[0].WindowNats {
		row.WindowBits[w] = float32(v / math.Ln2)
	}
	return row, nil
}

// cellsLine is "2048: 1.234, 4096: 1.456" for a log line.
func cellsLine(rows []Row) string {
	out := ""
	for i, r := range rows {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%d: %.3f", r.EvalLen, r.BitsPerByte)
	}
	return out + " bits/byte"
}
