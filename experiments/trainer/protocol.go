package trainer

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// The evaluation protocols: how a document of Len tokens is scored by a
// model (see Protocol).
const (
	ProtoFull   = "full"
	ProtoChunks = "chunks"
	ProtoStride = "stride"
	ProtoMemory = "memory"
	ProtoSinks  = "sinks"
)

// Protocols lists the protocol names, in the order of the docs.
var Protocols = []string{ProtoFull, ProtoChunks, ProtoStride, ProtoMemory, ProtoSinks}

// Protocol is how the evaluator scores a document: a window of Len tokens
// of the text (see Evaluator.Score for how a text is cut into documents),
// every target of which is scored exactly once, with a context that never
// reaches before the document's first byte. The protocols differ in what
// context each target sees and in what they cost:
//
//   - full: the whole document in one forward pass of length Len (the
//     target at position j sees positions 0..j); quality at Len is
//     extrapolation when Len exceeds the training length.
//   - chunks: non-overlapping chunks of Window tokens, each run on its own
//     (the second document's 分块处理): position j sees j mod Window
//     tokens before it. If Window does not divide Len, the last chunk is
//     right-aligned to the document's end and scores only the targets no
//     earlier chunk scored.
//   - stride: windows of Window tokens starting every Stride tokens (HF
//     transformers' perplexity guide): the first window scores all its
//     targets, each later one only its last Stride (the targets no earlier
//     window scored), so every target after the first window sees at least
//     Window-Stride tokens of context; a last window right-aligned to the
//     end covers the rest. Stride = Window is chunks; cost grows as
//     Window/Stride.
//   - memory: segments of Window tokens; every block of a segment also
//     attends to its own inputs of the Memory tokens before the segment,
//     held as constants (layers.SegmentRunner: Transformer-XL's
//     segment-level recurrence, Dai et al. 2019, for any encoding; the
//     document's 记忆缓存). A key/value memory of the same tokens gives the
//     same outputs, the keys and values being the same projections of the
//     kept states. The memory sits at positions 0..Memory-1 and the
//     segment at Memory..Memory+Window-1 in every segment, so a model
//     sees at most Memory+Window positions. Window must divide Len.
//   - sinks: token by token through the key/value cache of a window of
//     Window tokens (layers.Decoder) that keeps the first Sinks positions
//     and slides over the others once full (attention sinks, Xiao et al.
//     2023): position j sees positions 0..Sinks-1 and the last
//     Window-1-Sinks before it. Only encodings that decode incrementally
//     (posenc.Info.NoDecode empty) run it, and an absolute table only on
//     documents that fit the window (posenc.Info.NoSlide).
//
// A field that the protocol does not use must be 0 (a value given is used
// or refused). ParseProtocol reads the text form that String prints.
type Protocol struct {
	// Name is one of Protocols; "" is full.
	Name string
	// Window is the chunk, window or segment length (chunks, stride,
	// memory) or the cache window (sinks).
	Window int
	// Stride is the step between stride windows, 0 < Stride <= Window.
	Stride int
	// Memory is the number of states per block kept from the segments
	// before (memory; 0 is chunks).
	Memory int
	// Sinks is the number of first positions the sinks cache keeps,
	// 0 <= Sinks < Window-1.
	Sinks int
}

// name returns p.Name, "" being full.
func (p Protocol) name() string {
	if p.Name == "" {
		return ProtoFull
	}
	return p.Name
}

// String is the text form ParseProtocol reads: "full", "chunks:W",
// "stride:W:S", "memory:W:M" or "sinks:W:S".
func (p Protocol) String() string {
	switch p.name() {
	case ProtoChunks:
		return fmt.Sprintf("chunks:%d", p.Window)
	case ProtoStride:
		return fmt.Sprintf("stride:%d:%d", p.Window, p.Stride)
	case ProtoMemory:
		return fmt.Sprintf("memory:%d:%d", p.Window, p.Memory)
	case ProtoSinks:
		return fmt.Sprintf("sinks:%d:%d", p.Window, p.Sinks)
	}
	return p.name()
}

// Describe says in words what context a scored target sees.
func (p Protocol) Describe() string {
	switch p.name() {
	case ProtoChunks:
		return fmt.Sprintf("independent chunks of %d", p.Window)
	case ProtoStride:
		return fmt.Sprintf("windows of %d every %d (context >= %d)", p.Window, p.Stride, p.Window-p.Stride)
	case ProtoMemory:
		return fmt.Sprintf("segments of %d with %d states of memory", p.Window, p.Memory)
	case ProtoSinks:
		return fmt.Sprintf("sliding cache of %d keeping %d sinks", p.Window, p.Sinks)
	}
	return "the whole document"
}

// ParseProtocol reads a protocol from its text form (String): a name,
// optionally followed by ":Window" and ":Stride|Memory|Sinks". A parameter
// not given takes its default: Window = trainLen (the training length),
// Stride = Window/2, Memory = Window, Sinks = 4. A parameter given is used
// as given, 0 included ("sinks:512:0" has no sinks), and checked by
// Check when the document length is known. Errors name the text and what
// is wrong with it.
func ParseProtocol(s string, trainLen int) (Protocol, error) {
	parts := strings.Split(s, ":")
	p := Protocol{Name: parts[0]}
	known := false
	for _, n := range Protocols {
		known = known || n == p.Name
	}
	if !known {
		return Protocol{}, errors.Errorf("protocol %q: unknown name %q (want one of %s)", s, p.Name, strings.Join(Protocols, ", "))
	}
	nums := make([]int, len(parts)-1)
	for i, f := range parts[1:] {
		v, err := strconv.Atoi(f)
		if err != nil {
			return Protocol{}, errors.Errorf("protocol %q: parameter %q is not an integer", s, f)
		}
		nums[i] = v
	}
	maxParams := map[string]int{ProtoFull: 0, ProtoChunks: 1, ProtoStride: 2, ProtoMemory: 2, ProtoSinks: 2}[p.Name]
	if len(nums) > maxParams {
		return Protocol{}, errors.Errorf("protocol %q: %s takes at most %d parameters (%s), got %d", s, p.Name, maxParams, protoSyntax(p.Name), len(nums))
	}
	if p.Name == ProtoFull {
		return p, nil
	}
	p.Window = trainLen
	if len(nums) > 0 {
		p.Window = nums[0]
	}
	second := func(def int) int {
		if len(nums) > 1 {
			return nums[1]
		}
		return def
	}
	switch p.Name {
	case ProtoStride:
		p.Stride = second(p.Window / 2)
	case ProtoMemory:
		p.Memory = second(p.Window)
	case ProtoSinks:
		p.Sinks = second(4)
	}
	return p, nil
}

func protoSyntax(name string) string {
	return map[string]string{ProtoFull: "full", ProtoChunks: "chunks:WINDOW", ProtoStride: "stride:WINDOW:STRIDE",
		ProtoMemory: "memory:WINDOW:MEMORY", ProtoSinks: "sinks:WINDOW:SINKS"}[name]
}

// Check returns nil if p can score documents of docLen tokens, else an
// error naming the protocol and the parameter at fault.
func (p Protocol) Check(docLen int) error {
	bad := func(format string, args ...any) error {
		return errors.Errorf("protocol %s at document length %d: "+format, append([]any{p, docLen}, args...)...)
	}
	unused := func(fields ...string) error {
		vals := map[string]int{"window": p.Window, "stride": p.Stride, "memory": p.Memory, "sinks": p.Sinks}
		for _, f := range fields {
			if vals[f] != 0 {
				return bad("%s %d is not used by %s (must be 0)", f, vals[f], p.name())
			}
		}
		return nil
	}
	if docLen <= 0 {
		return bad("the document length must be positive")
	}
	switch p.name() {
	case ProtoFull:
		return unused("window", "stride", "memory", "sinks")
	case ProtoChunks, ProtoStride, ProtoMemory:
		if p.Window <= 0 || p.Window > docLen {
			return bad("window %d must be in [1, %d]", p.Window, docLen)
		}
	case ProtoSinks:
		if p.Window < 2 {
			return bad("window %d must be at least 2", p.Window)
		}
	default:
		return bad("unknown protocol %q (want one of %s)", p.Name, strings.Join(Protocols, ", "))
	}
	switch p.name() {
	case ProtoChunks:
		return unused("stride", "memory", "sinks")
	case ProtoStride:
		if p.Stride <= 0 || p.Stride > p.Window {
			return bad("stride %d must be in [1, %d] (the window)", p.Stride, p.Window)
		}
		return unused("memory", "sinks")
	case ProtoMemory:
		if docLen%p.Window != 0 {
			return bad("window %d must divide the document length", p.Window)
		}
		if p.Memory < 0 {
			return bad("memory %d must not be negative", p.Memory)
		}
		return unused("stride", "sinks")
	default: // sinks
		if p.Sinks < 0 || p.Sinks >= p.Window-1 {
			return bad("sinks %d must be in [0, %d) (the window minus 1)", p.Sinks, p.Window-1)
		}
		return unused("stride", "memory")
	}
}

// GraphLen returns the number of positions the protocol's graph holds for
// documents of docLen tokens: docLen (full), Window (chunks, stride,
// sinks) or Memory+Window (memory). Memory estimates use it.
func (p Protocol) GraphLen(docLen int) int {
	switch p.name() {
	case ProtoFull:
		return docLen
	case ProtoMemory:
		return p.Memory + p.Window
	}
	return p.Window
}

// scored is one target a protocol scores: position J of document Doc (of
// the batch), whose context is the document's positions [0, Sinks) and
// [From, J]. Logits are the model's scores of the next token.
type scored struct {
	Doc, J, Sinks, From int
	Logits              []float64
}

// Scorer scores documents of Len tokens with a Protocol, Batch documents
// at a time. NewScorer builds it; Close releases its graph.
type Scorer struct {
	Len, Batch int
	Protocol   Protocol

	ev  *Evaluator            // full, chunks, stride
	seg *layers.SegmentRunner // memory
	dec *layers.Decoder       // sinks
	// trace, if set, sees every scored target (tests).
	trace func(doc window, t scored)
}

// NewScorer builds the graph that scores documents of length tokens, batch
// at a time, with proto, over the weights of p: an Evaluator of [batch,
// length] (full) or [batch, Window] (chunks, stride), a
// layers.SegmentRunner (memory) or a layers.Decoder (sinks). Errors: an
// invalid protocol (Protocol.Check), a graph over the available memory
// (CheckEvalMemory at the protocol's GraphLen), an encoding that cannot
// run the protocol (a learned table shorter than GraphLen; an encoding
// that cannot decode incrementally, or an absolute table whose documents
// do not fit the window, for sinks), each naming the protocol.
func NewScorer(p *graph.Params, model layers.Config, batch, length int, proto Protocol) (*Scorer, error) {
	if batch <= 0 {
		return nil, errors.Errorf("scorer: batch %d must be positive", batch)
	}
	if err := proto.Check(length); err != nil {
		return nil, err
	}
	s := &Scorer{Len: length, Batch: batch, Protocol: proto}
	var err error
	switch proto.name() {
	case ProtoFull:
		s.ev, err = NewEvaluator(p, model, batch, length)
	case ProtoChunks, ProtoStride:
		s.ev, err = NewEvaluator(p, model, batch, proto.Window)
	case ProtoMemory:
		if err = CheckEvalMemory(model, batch, proto.GraphLen(length), int(p.Dtype().Size()), 0); err == nil {
			s.seg, err = layers.NewSegmentRunner(p, model, batch, proto.Window, proto.Memory)
		}
	case ProtoSinks:
		if slide := layers.CanSlide(model); proto.Window < length && slide != nil {
			err = errors.WithMessagef(slide, "documents of %d do not fit the window of %d", length, proto.Window)
			break
		}
		s.dec, err = layers.NewDecoder(p, model, batch, proto.Window, proto.Sinks)
	}
	if err != nil {
		return nil, errors.WithMessagef(err, "protocol %s", proto)
	}
	return s, nil
}

// Close releases the graph.
func (s *Scorer) Close() error {
	switch {
	case s.ev != nil:
		return s.ev.Close()
	case s.seg != nil:
		return s.seg.Close()
	case s.dec != nil:
		return s.dec.Close()
	}
	return nil
}

// Score scores text with one Score per entry of lastNs, as
// Evaluator.Score (the same documents, the same targets, lastN counting
// the last lastN positions of each document), each document being scored
// with the protocol. With full it is Evaluator.Score, bit for bit.
func (s *Scorer) Score(text []byte, lastNs []int, maxWindows int) ([]Score, error) {
	if s.Protocol.name() == ProtoFull {
		return s.ev.Score(text, lastNs, maxWindows)
	}
	what := fmt.Sprintf("protocol %s, documents", s.Protocol)
	return scoreDocs(text, lastNs, maxWindows, s.Len, s.Batch, what, func(docs []window, visit func(scored) error) error {
		return s.run(text, docs, visit)
	}, s.trace)
}

// run scores the documents docs (at most Batch) with the protocol, calling
// visit once for every position 0..Len-1 of every document, in document
// order within each pass.
func (s *Scorer) run(text []byte, docs []window, visit func(scored) error) error {
	switch s.Protocol.name() {
	case ProtoChunks:
		c := s.Protocol.Window
		return s.ev.runWindows(text, docs, s.Len, c, c, visit)
	case ProtoStride:
		return s.ev.runWindows(text, docs, s.Len, s.Protocol.Window, s.Protocol.Stride, visit)
	case ProtoMemory:
		return s.runMemory(text, docs, visit)
	default:
		return s.runSinks(text, docs, visit)
	}
}

// sub is a window of length c inside document doc starting at position
// start, scoring its positions from..c-1 (relative to start).
type sub struct{ doc, start, from int }

// subWindows returns the windows of length c that stride (stride s) runs
// over a document of le positions: starts 0, s, 2s, ... while the window
// fits, the first scoring all c positions and each later one its last s;
// then, if positions remain, one window right-aligned to the end scoring
// only those.
func subWindows(le, c, s int) []sub {
	var out []sub
	end := 0 // positions [0, end) are scored
	for st := 0; st+c <= le; st += s {
		out = append(out, sub{start: st, from: end - st})
		end = st + c
	}
	if end < le {
		out = append(out, sub{start: le - c, from: end - (le - c)})
	}
	return out
}

// runWindows runs every document's stride windows of length c (stride
// stride) over documents of le positions through the [Batch, c]
// evaluator, Batch windows per pass.
func (e *Evaluator) runWindows(text []byte, docs []window, le, c, stride int, visit func(scored) error) error {
	per := subWindows(le, c, stride)
	var all []sub
	for d := range docs {
		for _, w := range per {
			w.doc = d
			all = append(all, w)
		}
	}
	ids := make([]int, e.Batch*c)
	for w0 := 0; w0 < len(all); w0 += e.Batch {
		nb := min(e.Batch, len(all)-w0)
		for b := 0; b < e.Batch; b++ {
			w := all[w0+min(b, nb-1)] // padding rows repeat a real window
			base := docs[w.doc].start + w.start
			for j := 0; j < c; j++ {
				ids[b*c+j] = int(text[base+j])
			}
		}
		err := e.forward(ids, func(i int, logits []float64) error {
			b, j := i/c, i%c
			if b >= nb {
				return nil
			}
			w := all[w0+b]
			if j < w.from {
				return nil
			}
			return visit(scored{Doc: w.doc, J: w.start + j, From: w.start, Logits: logits})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// runMemory runs the documents segment by segment through the
// SegmentRunner (padding rows repeat the last document).
func (s *Scorer) runMemory(text []byte, docs []window, visit func(scored) error) error {
	ids := make([][]int, s.Batch)
	for b := range ids {
		w := docs[min(b, len(docs)-1)]
		ids[b] = make([]int, s.Len)
		for j := range ids[b] {
			ids[b][j] = int(text[w.start+j])
		}
	}
	segs, err := s.seg.Run(ids)
	if err != nil {
		return err
	}
	t, m := s.Protocol.Window, s.Protocol.Memory
	v := len(segs[0]) / (s.Batch * t)
	for k, lg := range segs {
		from := max(0, k*t-m)
		for b := range docs {
			for i := 0; i < t; i++ {
				r := b*t + i
				if err := visit(scored{Doc: b, J: k*t + i, From: from, Logits: lg[r*v : (r+1)*v]}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// runSinks steps the documents token by token through the Decoder
// (padding rows repeat the last document).
func (s *Scorer) runSinks(text []byte, docs []window, visit func(scored) error) error {
	s.dec.Reset()
	ids := make([]int, s.Batch)
	w, sinks := s.Protocol.Window, s.Protocol.Sinks
	for j := 0; j < s.Len; j++ {
		for b := range ids {
			ids[b] = int(text[docs[min(b, len(docs)-1)].start+j])
		}
		lg, err := s.dec.Step(ids)
		if err != nil {
			return errors.WithMessagef(err, "position %d", j)
		}
		v := len(lg) / s.Batch
		// The cache holds w-1 keys: while j < w everything is kept; then
		// the sinks and the w-1-sinks keys before the token.
		t := scored{J: j}
		if j >= w {
			t.Sinks, t.From = sinks, j-(w-1-sinks)
		}
		for b := range docs {
			t.Doc, t.Logits = b, lg[b*v:(b+1)*v]
			if err := visit(t); err != nil {
				return err
			}
		}
	}
	return nil
}

// runBatch is RunBatch for the protocol: for chunks and stride the batch
// runs sub-windows, so it is capped at the number of those instead of the
// number of documents.
func (p Protocol) runBatch(n int, opt EvalOptions, scoring bool) int {
	switch p.name() {
	case ProtoChunks, ProtoStride:
		if p.Check(opt.Len) != nil {
			return RunBatch(n, opt, scoring)
		}
		b := opt.Batch
		if b == 0 {
			b = 8
		}
		wide := opt
		wide.Batch = 1 << 30
		docs := RunBatch(n, wide, scoring)
		stride := p.Stride
		if p.name() == ProtoChunks {
			stride = p.Window
		}
		return min(b, docs*len(subWindows(opt.Len, p.Window, stride)))
	}
	return RunBatch(n, opt, scoring)
}
