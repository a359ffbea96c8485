package extrapstudy

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/posenc"
)

// Protocols of the evaluation: ProtocolAll scores every target of the
// non-overlapping windows of length Le; ProtocolLast scores only the last L
// targets of the same windows (each then has at least Le-L bytes of context,
// so a longer window can only help, and a loss comes from unseen positions).
const (
	ProtocolAll  = "all"
	ProtocolLast = "last-L"
)

// Protocols lists the protocols in the order of the tables and plots.
var Protocols = []string{ProtocolAll, ProtocolLast}

// RopeScalings are the evaluation-time scalings of RoPE (see posenc.Rope)
// evaluated on the trained "rope" model at Le > L with RopeScale = Le/L and
// RopeTrainLen = L: position interpolation, NTK-aware, dynamic NTK and YaRN.
var RopeScalings = []string{posenc.RopePI, posenc.RopeNTK, posenc.RopeDynamic, posenc.RopeYaRN, posenc.RopeLlama3}

// TrainableEncodings lists every encoding of posenc that is trained (the RoPE
// scalings are evaluation-time variants of "rope"), in the order of the
// tables: absolute encodings, then relative ones. It is derived from the
// registry (trainable).
var TrainableEncodings = trainable()

// trainable returns the trained encodings of posenc in table order.
func trainable() []string { return posenc.TrainableOn(posenc.PosLine) }

// servesLine reports whether the encoding (or combination) name serves line
// positions, the positions of a language model (posenc.InfoOf).
func servesLine(name string) bool {
	info, ok := posenc.InfoOf(name)
	return ok && slices.Contains(info.Positions, posenc.PosLine)
}

// Plan is a length-extrapolation study: one model per (encoding, seed),
// trained with Base, each evaluated at Le = f·L for every factor f with both
// protocols.
type Plan struct {
	// Preset names the plan ("quick", "full", or a custom name); the output
	// directory and the tables carry it.
	Preset string
	// Reduced says, for people reading the output, what the preset reduces
	// relative to the reference study ("" for none).
	Reduced string
	// Base is the training configuration of every model. Its Model.Pos is
	// replaced by each encoding and its Seed by each seed; a learned table
	// gets Model.PosOpts.MaxLen = Base.SeqLen rows.
	Base trainer.Config
	// Encodings are the trained encodings in table order: names of posenc
	// (not the RoPE scalings) or variants "name@key=value@..." that
	// override options of the training configuration (see ParseVariant).
	Encodings []string
	// Seeds are the seeds of the runs. The same seed gives every encoding
	// the same batches (and, for parameters they share, the same draws).
	Seeds []int64
	// Factors are the evaluation lengths in units of L (L = Base.SeqLen),
	// ascending, each at least 1; the reference is 1, 2, 4, 8.
	Factors []int
	// Scalings are RoPE scalings (RopeScalings) evaluated on the "rope"
	// model at the factors > 1. They are ignored if "rope" is not trained.
	Scalings []string
	// MaxWindows caps the evaluation text at MaxWindows windows of the
	// longest length (0: the whole validation split). Every length scores
	// the same text: the first k·Lmax+1 bytes of the validation split, so
	// protocol "all" scores the same k·Lmax targets at every length.
	MaxWindows int
	// EvalTokens is the number of tokens per evaluation forward pass: a pass
	// holds max(1, EvalTokens/Le) windows.
	EvalTokens int
	// SaveEvery > 0 saves a training checkpoint every SaveEvery updates (and
	// always at the end or on interruption).
	SaveEvery int
	// Corpus names the corpus the preset trains on (corpora.Open: "" is
	// the default, Opticks; "kjv" the King James Bible).
	Corpus string
	// Stream evaluates the full context with the streamed attention
	// (layers.Attention's Stream: O(Le) memory, the same scores up to
	// rounding), so lengths of 16K fit in memory; training and the
	// long-text protocols, whose graphs hold at most 2L positions, are not
	// streamed.
	Stream bool
	// LongText are the long-text protocols (trainer.Protocol: chunks,
	// stride, memory, sinks) scored, besides the full context, at every
	// length on each trained model with its own encoding (not the RoPE
	// scalings). Their rows carry the protocol's text form
	// ("chunks:512"); an encoding that cannot run one (sinks without
	// incremental decoding, or an absolute table past its window) gets a
	// row with status n/a saying why.
	LongText []trainer.Protocol
	// ByEncoding orders the jobs encoding-major (every seed of the first
	// encoding first) instead of seed-major, so that a study cut short by
	// its budget has complete encodings from the head of its priority list.
	ByEncoding bool
}

// ProtocolNames returns the protocols of the rows in table order:
// Protocols, then the text form of each LongText protocol.
func (p Plan) ProtocolNames() []string {
	out := append([]string(nil), Protocols...)
	for _, pr := range p.LongText {
		out = append(out, pr.String())
	}
	return out
}

// FullVariants are the variants the full preset trains after the plain
// encodings: sinusoidal with the paper's unit amplitude (the library's
// default is 1/sqrt(d_model)), and T5 and DeBERTa with their log buckets
// ending at 64 = L, so that no bucket is left untrained at L (does their
// loss at 8L come from buckets never trained?).
var FullVariants = []string{"sinusoidal@sinusoidal-scale=1", "t5@t5-max-distance=64", "deberta@deberta-max-position=64"}

// PresetNames lists the built-in presets.
func PresetNames() []string { return []string{"quick", "full", "long", "bible", "bible-large"} }

// LargeEncodings are the encodings of the bible-large preset: the key
// contrast of issue #33 (rope, evaluated with YaRN too; alibi; xl).
var LargeEncodings = []string{"rope", "alibi", "xl"}

// BibleEncodings are the encodings of the bible preset, in the priority
// order of issue #33 (rope, whose scalings come with it, then alibi, t5,
// xl, kerple-log, fire, cope, none); a budget cuts from the end.
var BibleEncodings = []string{"rope", "alibi", "t5", "xl", "kerple-log", "fire", "cope", "none"}

// BibleFactors are the lengths of the bible preset in units of L = 512:
// 512 ... 16,384 bytes.
var BibleFactors = []int{1, 2, 4, 8, 16, 32}

// BibleMaxWindows is the bible preset's evaluation text: the first 8
// windows of 32L = 16,384 bytes of the validation books (131,072 targets
// per length, 37% of the 357,659 validation bytes).
const BibleMaxWindows = 8

// LongTextProtocols returns the long-text protocols of the bible preset
// at training length L: independent chunks of L (the second document's
// 分块处理), windows of L every L/2, segments of L with L states of memory
// (记忆缓存), and a sliding cache of L keeping 4 sinks.
func LongTextProtocols(L int) []trainer.Protocol {
	return []trainer.Protocol{
		{Name: trainer.ProtoChunks, Window: L},
		{Name: trainer.ProtoStride, Window: L, Stride: L / 2},
		{Name: trainer.ProtoMemory, Window: L, Memory: L},
		{Name: trainer.ProtoSinks, Window: L, Sinks: 4},
	}
}

// LongEncodings are the encodings of the long preset: those of the RoPE
// versus ALiBi document (rope, alibi; its RoPE scalings come with rope)
// and the two relative encodings issue #17 adds, t5 and xl.
var LongEncodings = []string{"rope", "alibi", "t5", "xl"}

// Preset returns the built-in plan called name:
//
//   - "quick" (the default of the command) finishes well within 10
//     minutes on a 2-core CPU: none, sinusoidal, learned, t5, rope and
//     alibi, one seed, 150 updates of batch 16 (warm-up 15) instead of 2000
//     of batch 32, the evaluation capped at 16 windows of 8L (8192 targets
//     per length), and the four RoPE scalings. It is sized for 640 ms per
//     reference update (batch 32), about 6 minutes in all; on the 2-core
//     development machine with OpenBLAS it took 55 s (README);
//   - "full" is the reference study: every trainable encoding of posenc and
//     the variants FullVariants, the reference training of
//     trainer.DefaultConfig (2000 updates of batch 32 x 64), seeds 1, 2 and
//     3, the whole validation split.
//   - "long" is the long-context study in the proportions of the RoPE
//     versus ALiBi document (train at L, evaluate up to 8L): L = 512, so
//     the lengths are 512 ... 4096 bytes; LongEncodings and the RoPE
//     scalings, seeds 1, 2 and 3, 1000 updates of batch 4 x 512 (warm-up
//     100: the reference's 2048 tokens per update, half its 2000 updates),
//     the whole validation split (13 windows of 4096 bytes). About half an
//     hour per seed on a 2-core CPU (docs/studies/extrapolation.md gives
//     the measured time).
//   - "bible" is the long preset on the King James Bible (corpus "kjv",
//     split by book: corpora.LoadBible) in the priority order of issue #33:
//     BibleEncodings and the RoPE scalings, seeds 1, 2 and 3 (jobs
//     encoding-major), the long preset's training, evaluated with the
//     streamed attention at BibleFactors (512 ... 16,384 bytes) on the first
//     BibleMaxWindows windows of 16,384 bytes, with the full context and
//     every LongTextProtocols protocol.
//   - "bible-large" is the key contrast of the bible preset at about 4x
//     the parameters: d = 256 (4 heads of 64), FFN 1024, 2 layers (1.7 M
//     parameters against 0.46 M), LargeEncodings with rope-yarn at
//     evaluation, seeds 1, 2 and 3, the same training and text, scored at
//     1L ... 16L (512 ... 8,192 bytes) with the full context only.
//
// The others evaluate at L, 2L, 4L and 8L (64 ... 512 bytes for quick and
// full).
func Preset(name string) (Plan, error) {
	base := trainer.DefaultConfig()
	base.Model.PosOpts.MaxLen = base.SeqLen
	p := Plan{
		Preset:     name,
		Base:       base,
		Seeds:      []int64{1},
		Factors:    []int{1, 2, 4, 8},
		Scalings:   append([]string(nil), RopeScalings...),
		EvalTokens: 2048,
		SaveEvery:  50,
	}
	switch name {
	case "quick":
		p.Encodings = []string{"none", "sinusoidal", "learned", "t5", "rope", "alibi"}
		p.Base.Steps, p.Base.Batch, p.Base.Warmup = 150, 16, 15
		p.MaxWindows = 16
		p.SaveEvery = 25
	case "full":
		p.Encodings = append(trainable(), FullVariants...)
		p.Seeds = []int64{1, 2, 3}
		p.SaveEvery = 100
	case "long":
		p.Encodings = append([]string(nil), LongEncodings...)
		p.Base.SeqLen, p.Base.Model.PosOpts.MaxLen = 512, 512
		p.Base.Steps, p.Base.Batch, p.Base.Warmup = 1000, 4, 100
		p.Seeds = []int64{1, 2, 3}
	case "bible":
		p.Encodings = append([]string(nil), BibleEncodings...)
		p.Base.SeqLen, p.Base.Model.PosOpts.MaxLen = 512, 512
		p.Base.Steps, p.Base.Batch, p.Base.Warmup = 1000, 4, 100
		p.Seeds = []int64{1, 2, 3}
		p.Factors = append([]int(nil), BibleFactors...)
		p.MaxWindows = BibleMaxWindows
		p.Corpus, p.Stream, p.ByEncoding = "kjv", true, true
		p.LongText = LongTextProtocols(512)
	case "bible-large":
		p.Encodings = append([]string(nil), LargeEncodings...)
		p.Scalings = []string{posenc.RopeYaRN}
		p.Base.SeqLen, p.Base.Model.PosOpts.MaxLen = 512, 512
		p.Base.Steps, p.Base.Batch, p.Base.Warmup = 1000, 4, 100
		p.Base.Model.DModel, p.Base.Model.FFN = 256, 1024
		p.Seeds = []int64{1, 2, 3}
		p.Factors = []int{1, 2, 4, 8, 16}
		p.MaxWindows = 2 * BibleMaxWindows // the bible preset's 131,072 targets, in windows of 8,192
		p.Corpus, p.Stream, p.ByEncoding = "kjv", true, true
	default:
		return Plan{}, errors.Errorf("unknown preset %q (valid: %s)", name, strings.Join(PresetNames(), ", "))
	}
	p.Reduced = DescribeReductions(p)
	return p, nil
}

// DescribeReductions says how p is reduced relative to the reference study
// (every trainable encoding, plain or as a variant, 3 seeds, trainer.DefaultConfig's training, the
// whole validation split); "" if it is not.
func DescribeReductions(p Plan) string {
	ref := trainer.DefaultConfig()
	var r []string
	all := trainable()
	covered := 0
	for _, e := range all {
		for _, v := range p.Encodings {
			if b, _, _ := strings.Cut(v, "@"); b == e {
				covered++
				break
			}
		}
	}
	if covered < len(all) {
		r = append(r, fmt.Sprintf("%d of %d encodings", covered, len(all)))
	}
	if len(p.Seeds) < 3 {
		r = append(r, fmt.Sprintf("%d seed(s) instead of 3", len(p.Seeds)))
	}
	if p.Base.Steps != ref.Steps || p.Base.Batch != ref.Batch {
		r = append(r, fmt.Sprintf("%d updates of batch %d (warm-up %d) instead of %d of batch %d (warm-up %d)",
			p.Base.Steps, p.Base.Batch, p.Base.Warmup, ref.Steps, ref.Batch, ref.Warmup))
	}
	if p.MaxWindows > 0 {
		lmax := p.Base.SeqLen * p.maxFactor()
		r = append(r, fmt.Sprintf("evaluation on the first %d windows of %d bytes (%d targets per length) of the validation split instead of all of it",
			p.MaxWindows, lmax, p.MaxWindows*lmax))
	}
	return strings.Join(r, "; ")
}

func (p Plan) maxFactor() int {
	m := 1
	for _, f := range p.Factors {
		m = max(m, f)
	}
	return m
}

// TrainLen is L, the training length.
func (p Plan) TrainLen() int { return p.Base.SeqLen }

// Lengths returns the evaluation lengths Le = f·L.
func (p Plan) Lengths() []int { return study.ScaledLengths(p.Factors, p.Base.SeqLen) }

// Config returns the training configuration of encoding enc (a name or a
// variant "name@key=value@...", see ParseVariant) and seed: Base with
// Model.Pos = the name, Seed = seed, Model.PosOpts.MaxLen = SeqLen (a
// learned table covers the training length), then the variant's overrides.
// A spec that does not parse is left whole in Model.Pos (Validate reports
// it).
func (p Plan) Config(enc string, seed int64) trainer.Config {
	c := p.Base
	c.Model.Pos = enc
	c.Seed = seed
	c.Model.PosOpts.MaxLen = c.SeqLen // a learned table covers the training length
	if v, err := study.ParseVariant(enc); err == nil {
		if v.Apply(&c) != nil {
			c.Model.Pos = enc // not a valid encoding: Validate reports it
		}
	}
	return c
}

// label returns the canonical label of plan entry enc (the entry itself if
// it does not parse).
func label(enc string) string {
	if v, err := study.ParseVariant(enc); err == nil {
		return v.Label()
	}
	return enc
}

// Labels returns the canonical labels of the trained encodings (see
// Variant.Label), in table order.
func (p Plan) Labels() []string {
	out := make([]string, len(p.Encodings))
	for i, e := range p.Encodings {
		out[i] = label(e)
	}
	return out
}

// hasRope reports whether the RoPE scalings are evaluated.
func (p Plan) hasRope() bool {
	return slices.Contains(p.Labels(), posenc.RopePlain) && len(p.Scalings) > 0
}

// EvalNames returns the encodings as evaluated, in table order: the labels
// of the trained encodings, with the RoPE scalings right after "rope".
func (p Plan) EvalNames() []string {
	var out []string
	for _, e := range p.Labels() {
		out = append(out, e)
		if e == posenc.RopePlain && p.hasRope() {
			out = append(out, p.Scalings...)
		}
	}
	return out
}

// ModelJob is the training of one (encoding, seed).
type ModelJob struct {
	// Encoding is the label of the plan entry (a name of posenc, or a
	// variant's canonical label); Cfg.Model.Pos is the posenc name.
	Encoding string
	Seed     int64
	Cfg      trainer.Config
}

// Key names the job's directory: "<encoding>-seed<seed>" (a variant's label
// holds only letters, digits and "@=._+-", so the key is a safe file name).
func (j ModelJob) Key() string { return fmt.Sprintf("%s-seed%d", j.Encoding, j.Seed) }

// EvalJob is the evaluation of a trained model with one encoding (the
// trained one, or a RoPE scaling of the rope model) at the given factors.
type EvalJob struct {
	Model ModelJob
	// Encoding is the encoding used at evaluation.
	Encoding string
	Factors  []int
}

// Key names the job's result file: "<eval encoding>-seed<seed>".
func (j EvalJob) Key() string { return fmt.Sprintf("%s-seed%d", j.Encoding, j.Model.Seed) }

// ModelJobs lists the trainings, seed-major (every encoding of seed 1
// first), so that an interrupted study has complete seeds; with
// ByEncoding, encoding-major.
func (p Plan) ModelJobs() []ModelJob {
	var out []ModelJob
	if p.ByEncoding {
		for _, e := range p.Encodings {
			for _, s := range p.Seeds {
				out = append(out, ModelJob{Encoding: label(e), Seed: s, Cfg: p.Config(e, s)})
			}
		}
		return out
	}
	for _, s := range p.Seeds {
		for _, e := range p.Encodings {
			out = append(out, ModelJob{Encoding: label(e), Seed: s, Cfg: p.Config(e, s)})
		}
	}
	return out
}

// EvalJobs lists the evaluations of model m: its own encoding at every
// factor, and for "rope" each scaling at the factors > 1.
func (p Plan) EvalJobs(m ModelJob) []EvalJob {
	out := []EvalJob{{Model: m, Encoding: m.Encoding, Factors: p.Factors}}
	if m.Encoding == posenc.RopePlain && p.hasRope() {
		var fs []int
		for _, f := range p.Factors {
			if f > 1 {
				fs = append(fs, f)
			}
		}
		if len(fs) > 0 {
			for _, s := range p.Scalings {
				out = append(out, EvalJob{Model: m, Encoding: s, Factors: fs})
			}
		}
	}
	return out
}

// EvalModel returns the model configuration of an evaluation at length le:
// the trained model's (a variant's overrides included), streamed if
// p.Stream, with, for a RoPE
// scaling, its encoding replaced by the scaling, RopeScale = le/L and
// RopeTrainLen = L.
func (p Plan) EvalModel(j EvalJob, le int) (cfg trainer.Config) {
	cfg = j.Model.Cfg
	cfg.Model.Stream = p.Stream
	if j.Encoding != j.Model.Encoding {
		cfg.Model.Pos = j.Encoding
		cfg.Model.PosOpts.RopeScale = float64(le) / float64(cfg.SeqLen)
		cfg.Model.PosOpts.RopeTrainLen = cfg.SeqLen
	}
	return cfg
}

// EvalText returns the evaluation text of the validation split val: all of
// it, or with MaxWindows > 0 its first k·Lmax+1 bytes, k = min(MaxWindows,
// (len(val)-1)/Lmax), Lmax the longest evaluation length. Every length
// scores every target of the text once under protocol "all" (the engine's
// tail window scores the bytes after the last whole window; see
// trainer.Evaluator.Score). It is an error if val holds no window of Lmax.
func (p Plan) EvalText(val []byte) ([]byte, error) {
	lmax := p.Base.SeqLen * p.maxFactor()
	k := trainer.Windows(len(val), lmax)
	if k == 0 {
		return nil, errors.Errorf("the validation split (last 10%% of the corpus) has %d bytes, too short for one evaluation window of Le = %dL = %d bytes plus its target (%d bytes); use a longer corpus or smaller lengths",
			len(val), p.maxFactor(), lmax, lmax+1)
	}
	if p.MaxWindows > 0 && k > p.MaxWindows {
		return val[:p.MaxWindows*lmax+1], nil
	}
	if p.MaxWindows > 0 {
		return val[:k*lmax+1], nil
	}
	return val, nil
}

// Validate checks the plan and the corpus before anything is trained: known,
// trainable, distinct encodings and well-formed variants; scalings of RoPE; seeds; factors; every
// configuration; a corpus whose training part holds a window of L+1 bytes
// and whose validation part holds one of 8L+1 (the longest length) bytes.
func (p Plan) Validate(c *trainer.Corpus) error {
	if p.Preset == "" || strings.ContainsAny(p.Preset, `/\ `) {
		return errors.Errorf("plan: preset name %q must be non-empty, without spaces or slashes (it names the output directory)", p.Preset)
	}
	if len(p.Encodings) == 0 {
		return errors.New("plan: no encodings")
	}
	known := posenc.Names()
	seen := map[string]bool{}
	for _, spec := range p.Encodings {
		v, err := study.ParseVariant(spec)
		if err != nil {
			return errors.WithMessage(err, "plan")
		}
		e := v.Base
		switch {
		case slices.Contains(RopeScalings, e):
			return errors.Errorf("plan: %q is an evaluation-time scaling of rope, not a trained encoding (it is evaluated on the rope model; valid trained encodings: %s)",
				e, strings.Join(trainable(), ", "))
		case !slices.Contains(known, e) && !strings.Contains(e, posenc.CombineSep):
			return errors.Errorf("plan: unknown encoding %q (valid: %s)", e, strings.Join(trainable(), ", "))
		case !servesLine(e):
			return errors.Errorf("plan: encoding %q does not serve a line of text (it serves %s); this study trains language models, on encodings of line positions: %s",
				e, study.ServedKinds(e), strings.Join(trainable(), ", "))
		case seen[v.Label()]:
			return errors.Errorf("plan: encoding %q listed twice", v.Label())
		}
		seen[v.Label()] = true
	}
	for _, s := range p.Scalings {
		if !slices.Contains(RopeScalings, s) {
			return errors.Errorf("plan: unknown RoPE scaling %q (valid: %s)", s, strings.Join(RopeScalings, ", "))
		}
	}
	if len(p.Seeds) == 0 {
		return errors.New("plan: no seeds")
	}
	ss := map[int64]bool{}
	for _, s := range p.Seeds {
		if ss[s] {
			return errors.Errorf("plan: seed %d listed twice", s)
		}
		ss[s] = true
	}
	if len(p.Factors) == 0 {
		return errors.New("plan: no evaluation lengths")
	}
	if !sort.IntsAreSorted(p.Factors) || p.Factors[0] < 1 {
		return errors.Errorf("plan: length factors %v must be ascending and at least 1 (Le >= L)", p.Factors)
	}
	for i := 1; i < len(p.Factors); i++ {
		if p.Factors[i] == p.Factors[i-1] {
			return errors.Errorf("plan: length factor %d listed twice", p.Factors[i])
		}
	}
	for _, f := range p.Factors {
		if p.maxFactor()%f != 0 {
			return errors.Errorf("plan: length factors %v: each must divide the largest, so every length tiles the same text", p.Factors)
		}
	}
	seenProto := map[string]bool{}
	for _, pr := range p.LongText {
		if pr.Name == "" || pr.Name == trainer.ProtoFull {
			return errors.Errorf("plan: long-text protocol %q: the full context is always scored (protocols %q and %q)", pr, ProtocolAll, ProtocolLast)
		}
		if seenProto[pr.String()] {
			return errors.Errorf("plan: long-text protocol %s listed twice", pr)
		}
		seenProto[pr.String()] = true
		for _, le := range p.Lengths() {
			if err := pr.Check(le); err != nil {
				return errors.WithMessage(err, "plan")
			}
		}
	}
	if p.MaxWindows < 0 || p.EvalTokens <= 0 || p.SaveEvery < 0 {
		return errors.Errorf("plan: max windows %d and save every %d must not be negative, eval tokens %d must be positive",
			p.MaxWindows, p.SaveEvery, p.EvalTokens)
	}
	for _, m := range p.ModelJobs() {
		if err := m.Cfg.Validate(); err != nil {
			return errors.WithMessagef(err, "plan: %s", m.Key())
		}
		if err := trainer.CheckMemory(m.Cfg, 0); err != nil {
			return errors.WithMessagef(err, "plan: %s", m.Key())
		}
		for _, j := range p.EvalJobs(m) {
			for _, f := range j.Factors {
				cfg := p.EvalModel(j, f*p.Base.SeqLen)
				if err := cfg.Validate(); err != nil {
					return errors.WithMessagef(err, "plan: evaluating %s at %dL", j.Key(), f)
				}
			}
		}
	}
	if c == nil {
		return errors.New("plan: no corpus")
	}
	if len(c.Train) == 0 && len(c.Val) == 0 {
		return errors.New("corpus is empty")
	}
	if err := c.CheckWindow(p.Base.SeqLen); err != nil {
		return err
	}
	if _, err := p.EvalText(c.Val); err != nil {
		return errors.WithMessagef(err, "corpus %s", corpusName(c))
	}
	return nil
}

// EncodingNames returns the posenc names the plan builds: the base of
// every trained encoding or variant and, if rope is trained, the RoPE
// scalings it evaluates.
func (p Plan) EncodingNames() []string {
	var out []string
	for _, e := range p.Encodings {
		b, _, _ := strings.Cut(e, "@")
		out = append(out, b)
		if b == posenc.RopePlain {
			out = append(out, p.Scalings...)
		}
	}
	return out
}
