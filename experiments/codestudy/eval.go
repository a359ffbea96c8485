package codestudy

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/gocode"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// anchorStream is the second PCG seed word of Anchors ("anchor").
const anchorStream = 0x616e63686f72

// Anchor fixes an evaluation window by where it ends: the window of length
// le at the anchor has inputs File.Src[End-le : End] and next-byte targets
// File.Src[End-le+1 : End+1]. Windows of every length at one anchor end at
// the same byte, so their last targets are the same bytes.
type Anchor struct {
	File *gocode.File
	End  int
}

// Anchors draws n anchors from files, uniformly over every (file, end)
// pair with room for a window of span input bytes (span <= End <=
// len(Src)-1), from a PCG generator seeded with seed; files shorter than
// span+1 bytes are never drawn. The draw depends only on the files, n, span
// and seed, so every model of a study is scored on the same windows, and a
// shorter window at an anchor is the tail of the longest one. Anchors are
// sorted by file, then end. It returns an error if n or span is not
// positive or no file has span+1 bytes.
func Anchors(files []*gocode.File, n, span int, seed uint64) ([]Anchor, error) {
	if n <= 0 || span <= 0 {
		return nil, errors.Errorf("codestudy: %d windows of %d bytes: both must be positive", n, span)
	}
	var eligible []*gocode.File
	var cum []int64
	var total int64
	for _, f := range files {
		if k := len(f.Src) - span; k > 0 {
			total += int64(k)
			eligible = append(eligible, f)
			cum = append(cum, total)
		}
	}
	if total == 0 {
		return nil, errors.Errorf("codestudy: no file of the %d given has %d+1 bytes for a window of %d bytes", len(files), span, span)
	}
	rng := rand.New(rand.NewPCG(seed, anchorStream))
	out := make([]Anchor, n)
	idx := make([]int, n)
	for i := range out {
		r := rng.Int64N(total)
		fi := sort.Search(len(cum), func(k int) bool { return cum[k] > r })
		off := r
		if fi > 0 {
			off -= cum[fi-1]
		}
		idx[i] = fi
		out[i] = Anchor{File: eligible[fi], End: int(off) + span}
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if idx[a] != idx[b] {
			return idx[a] - idx[b]
		}
		return out[a].End - out[b].End
	})
	sorted := make([]Anchor, n)
	for i, o := range order {
		sorted[i] = out[o]
	}
	return sorted, nil
}

// Result is the score of a model on a set of windows of one length.
type Result struct {
	// Length is the window length (input bytes per window).
	Length int `json:"length"`
	// Windows is the number of windows scored, Targets the next-byte
	// targets scored (Windows*Length) and BitsPerByte their mean
	// cross-entropy in bits.
	Windows     int     `json:"windows"`
	Targets     int     `json:"targets"`
	BitsPerByte float64 `json:"bits_per_byte"`
	// TargetsLast and BitsPerByteLast count only the last LastN targets of
	// each window: the same bytes at every length of one anchor set.
	LastN           int     `json:"last_n"`
	TargetsLast     int     `json:"targets_last"`
	BitsPerByteLast float64 `json:"bits_per_byte_last"`
	// WindowBPB and WindowBPBLast are each window's bits per byte over
	// its Length targets and over its last LastN, in the order of the
	// anchors: their means are BitsPerByte and BitsPerByteLast.
	WindowBPB     []float32 `json:"window_bpb,omitempty"`
	WindowBPBLast []float32 `json:"window_bpb_last,omitempty"`
}

// EvalSpec is what Evaluate needs besides the weights.
type EvalSpec struct {
	// Model is the language model (causal).
	Model layers.Config
	// Length is the window length, LastN the number of final targets of
	// each window counted in Result.BitsPerByteLast (0 < LastN <= Length).
	Length, LastN int
	// Batch is the number of windows per forward pass (the last batch is
	// padded with copies of its first window, not counted).
	Batch int
	// MaxUp and MaxDown bound the tree relations of pairwise encodings.
	MaxUp, MaxDown int
}

// Pairwise reports whether encoding e is given the pairwise tree relations
// of the windows: whether it, or a part of it (posenc.AsCombined), cannot
// serve line positions (posenc.CheckKind) but serves pairwise ones
// (posenc.Accepted). Encodings that serve line positions (t5, alibi, rope,
// and none, which serves every kind and uses none) get no positions and
// see the 1-D span; a combined one ("tree+rope") gets the relations, and
// its 1-D part sees the span.
func Pairwise(e posenc.Encoding) bool {
	parts := []posenc.Encoding{e}
	if c, ok := posenc.AsCombined(e); ok {
		parts = c.Parts()
	}
	for _, p := range parts {
		if posenc.CheckKind(p, nil) != nil && slices.Contains(posenc.Accepted(p), posenc.PosPairwise) {
			return true
		}
	}
	return false
}

// forward is one forward-only graph of the model for [Batch, Len] windows,
// with pairwise positions bound through a Feed when the encoding takes
// them.
type forward struct {
	p      *graph.Params
	g      *G.ExprGraph
	vm     G.VM
	b, l   int
	numRel int
	ids    []int
	rel    []int
	idsT   *tensor.Dense
	idsN   *G.Node
	pos    *posenc.Positions // the build positions (with their Feed), nil for 1-D encodings
	logits *G.Node
}

func newForward(p *graph.Params, model layers.Config, b, l, maxUp, maxDown int) (*forward, error) {
	if b <= 0 || l <= 0 {
		return nil, errors.Errorf("codestudy: evaluation batch %d and length %d must be positive", b, l)
	}
	name := model.Pos
	if name == "" {
		name = "none"
	}
	enc, err := posenc.New(name, model.PosOpts)
	if err != nil {
		return nil, err
	}
	f := &forward{p: p, g: G.NewGraph(), b: b, l: l, ids: make([]int, b*l)}
	if Pairwise(enc) {
		f.numRel = gocode.NumTreeRelations(maxUp, maxDown)
		f.rel = make([]int, b*l*l)
		pos, err := posenc.NewPairwise(b, l, l, f.numRel, f.rel)
		if err != nil {
			return nil, err
		}
		f.pos = withFeed(pos)
	}
	lm, err := layers.NewLM(f.g, p, model)
	if err != nil {
		p.Forget(f.g)
		return nil, errors.WithMessage(err, "codestudy: building the model")
	}
	f.idsT = tensor.New(tensor.WithShape(b, l), tensor.WithBacking(f.ids))
	f.idsN = G.NewMatrix(f.g, tensor.Int, G.WithShape(b, l), G.WithName("code_eval_ids"), G.WithValue(f.idsT))
	if f.logits, err = fwd(lm, f.idsN, f.pos); err != nil {
		p.Forget(f.g)
		return nil, errors.WithMessagef(err, "codestudy: model at length %d", l)
	}
	f.vm = G.NewTapeMachine(f.g)
	return f, nil
}

func (f *forward) close() error {
	f.p.Forget(f.g)
	return f.vm.Close()
}

// run binds f.ids (and f.rel) and runs the graph.
func (f *forward) run() error {
	if f.pos != nil {
		if err := bindFeed(f.pos, f.rel); err != nil {
			return err
		}
	}
	if err := G.Let(f.idsN, f.idsT); err != nil {
		return errors.Wrap(err, "codestudy: binding ids")
	}
	return errors.Wrap(f.vm.RunAll(), "codestudy: forward")
}

// Evaluate scores the weights p on the window of length s.Length at every
// anchor: the bits per byte of every target and of the last s.LastN
// targets of each window. An anchor with fewer than s.Length bytes before
// its end is an error, and so is a non-finite score.
func Evaluate(p *graph.Params, anchors []Anchor, s EvalSpec) (Result, error) {
	r := Result{Length: s.Length, LastN: s.LastN}
	if len(anchors) == 0 {
		return r, errors.New("codestudy: no windows to evaluate")
	}
	if s.LastN <= 0 || s.LastN > s.Length {
		return r, errors.Errorf("codestudy: last %d targets of windows of %d bytes: want 0 < last <= length", s.LastN, s.Length)
	}
	for i, a := range anchors {
		if a.File == nil || a.End-s.Length < 0 || a.End+1 > len(a.File.Src) {
			return r, errors.Errorf("codestudy: window %d of %d bytes ending at %d does not fit its file", i, s.Length, a.End)
		}
	}
	b := min(s.Batch, len(anchors))
	f, err := newForward(p, s.Model, b, s.Length, s.MaxUp, s.MaxDown)
	if err != nil {
		return r, err
	}
	defer f.close()
	l := s.Length
	tgts := make([]int, b*l)
	var scratch []int // relations of 1-D encodings' windows, unused
	if f.rel == nil {
		scratch = make([]int, l*l)
	}
	var nats, natsLast float64
	wb, wbl := make([]float64, len(anchors)), make([]float64, len(anchors))
	buf := make([]float64, 0, 256)
	for start := 0; start < len(anchors); start += b {
		n := min(b, len(anchors)-start)
		for i := 0; i < b; i++ {
			a := anchors[start] // padding: the batch's first window again
			if i < n {
				a = anchors[start+i]
			}
			rel := scratch
			if f.rel != nil {
				rel = f.rel[i*l*l : (i+1)*l*l]
			}
			if err := gocode.Window(a.File, a.End-l, l, s.MaxUp, s.MaxDown, f.ids[i*l:(i+1)*l], tgts[i*l:(i+1)*l], rel); err != nil {
				return r, err
			}
		}
		if err := f.run(); err != nil {
			return r, err
		}
		v := f.logits.Shape()[1]
		for i := 0; i < n*l; i++ {
			buf = rowFloat64(f.logits.Value(), i, v, buf)
			lp := trainer.LogSoftmaxAt(buf, tgts[i])
			nats -= lp
			wb[start+i/l] -= lp
			if i%l >= l-s.LastN {
				natsLast -= lp
				wbl[start+i/l] -= lp
			}
		}
		f.vm.Reset()
		r.Windows += n
	}
	r.Targets, r.TargetsLast = r.Windows*l, r.Windows*s.LastN
	for w := range wb {
		r.WindowBPB = append(r.WindowBPB, float32(wb[w]/float64(l)/math.Ln2))
		r.WindowBPBLast = append(r.WindowBPBLast, float32(wbl[w]/float64(s.LastN)/math.Ln2))
	}
	r.BitsPerByte = nats / float64(r.Targets) / math.Ln2
	r.BitsPerByteLast = natsLast / float64(r.TargetsLast) / math.Ln2
	if math.IsNaN(r.BitsPerByte) || math.IsInf(r.BitsPerByte, 0) {
		return r, errors.Errorf("codestudy: bits per byte %v at length %d: the model's outputs are not finite", r.BitsPerByte, l)
	}
	return r, nil
}

// rowFloat64 copies row i of the [n, v] value into buf as float64.
func rowFloat64(val G.Value, i, v int, buf []float64) []float64 {
	buf = buf[:v]
	switch d := val.Data().(type) {
	case []float32:
		for j, x := range d[i*v : (i+1)*v] {
			buf[j] = float64(x)
		}
	case []float64:
		copy(buf, d[i*v:(i+1)*v])
	}
	return buf
}
