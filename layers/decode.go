package layers

import (
	"fmt"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// Decoder runs a causal language model one token per step against a cache
// of every block's projected keys and values (the key/value cache of
// HF transformers' past_key_values): a step costs O(W·d) per block for a
// cache of W-1 keys, not a forward pass over the whole window.
//
// One graph is built for B sequences and reused for every step: the cache
// sits at positions 0..W-2 and the new token at W-1, the positions being
// re-indexed inside the cache at each step as in StreamingLLM (Xiao et al.
// 2023). That is exact for the encodings that depend on positions only
// through their differences; posenc.Info.NoDecode names the others, and
// NewDecoder refuses them with that reason. While the cache fills, its
// empty slots are masked; once it holds W-1 keys the oldest is dropped
// (a sliding window), except the first Sinks ones (attention sinks).
// An absolute table (posenc.StepAdder) gets each new token's own position
// at run time instead; its cache cannot slide (CanSlide), and a step past
// the window is an error.
//
// Until the context exceeds W tokens, every step's logits equal those of
// the full computation of the model over the whole context (up to
// rounding). A Decoder is not safe for concurrent use; Close releases it.
type Decoder struct {
	// B is the number of sequences, W the window (the cache holds W-1
	// keys and values) and Sinks the number of first positions kept once
	// the window slides.
	B, W, Sinks int

	lm  *LM
	g   *G.ExprGraph
	p   *graph.Params
	ids []int
	// ks, vs are per block the caches [B, W, d] bound to the cache inputs:
	// rows 0..W-2 the cache, row W-1 the room the step writes its token's
	// key and value into (KV.Room), moved into the cache by a slide after
	// it.
	ks, vs []*slideBuf
	mask   *tensor.Dense // [B, 1, 1, W]; empty cache slots are 0
	maskv  []float64     // the mask's values, [B, W]
	// logits is the Read target of the logits, allocated apart from the
	// decoder (not a field of it): the tape machine points to it and has
	// a finalizer, so a cycle decoder -> machine -> &decoder.field ->
	// decoder would never be collected (runtime.SetFinalizer).
	logits *G.Value
	vm     G.VM
	filled []int // keys in each sequence's cache, <= W-1
	seen   []int // tokens each sequence stepped since Reset
	// step, for an absolute table (posenc.StepAdder), is the one-hot
	// [B, W] of each new token's position; nil otherwise.
	step  *tensor.Dense
	stepv []float64
	// noSlide is the encoding's reason its cache cannot slide (empty: it
	// can), name its name.
	noSlide, name string
	// feed, for an encoding that decodes at true positions
	// (posenc.Info.DecodeTrue), rebinds the real positions of every step:
	// qt [B] the new tokens', kt [B, W] the cache's and the new tokens'.
	feed   *posenc.Feed
	qt, kt []float64
}

// NewDecoder builds the decoding graph of the causal model cfg (weights from
// p, shared with every graph built from p) for b sequences and a window of w
// tokens (w >= 2), keeping the first sinks positions once the window slides
// (0 <= sinks < w-1). It refuses a model that is not causal and an encoding
// whose registry entry says it cannot decode incrementally, with the reason.
func NewDecoder(p *graph.Params, cfg Config, b, w, sinks int) (*Decoder, error) {
	if b <= 0 || w < 2 || sinks < 0 || sinks >= w-1 {
		return nil, errors.Errorf("decoder: batch %d must be positive, window %d at least 2 and sinks %d in [0, %d)", b, w, sinks, w-1)
	}
	if !cfg.Causal {
		return nil, errors.New("decoder: the model is not causal; only a causal model decodes one token at a time")
	}
	if err := CanDecode(cfg); err != nil {
		return nil, err
	}
	if err := CheckDecodeWindow(cfg, w); err != nil {
		return nil, err
	}
	// A step's attention is [B, H, 1, W]: nothing to stream (and the
	// streamed CoPE takes no mask bound at run time).
	cfg.Stream = false
	g := G.NewGraph()
	lm, err := NewLM(g, p, cfg)
	if err != nil {
		return nil, err
	}
	if xl, ok := lm.Pos.(*posenc.XL); ok {
		// The span and the weights stay the same from step to step: P = R·W_r
		// is computed once, not at every step (it is W·d² per block).
		xl.Memo = true
	}
	m, d, dt := w-1, cfg.DModel, p.Dtype()
	r := &Decoder{B: b, W: w, Sinks: sinks, lm: lm, g: g, p: p, ids: make([]int, b), filled: make([]int, b), seen: make([]int, b), maskv: make([]float64, b*w), logits: new(G.Value)}
	ids := G.NewTensor(g, tensor.Int, 2, G.WithShape(b, 1), G.WithName(graph.UniqueName(g, "decode_ids")),
		G.WithValue(tensor.New(tensor.WithShape(b, 1), tensor.WithBacking(r.ids))))
	o := Options{Start: m}
	for l := 0; l < cfg.Layers; l++ {
		kv := KV{Room: true}
		for i, which := range []string{"k", "v"} {
			c := newSlideBuf(dt, b, w, d)
			n := G.NewTensor(g, dt, 3, G.WithShape(b, w, d), G.WithValue(c.view), G.WithName(graph.UniqueName(g, fmt.Sprintf("block%d/cache_%s", l, which))))
			c.node = n
			if i == 0 {
				r.ks, kv.K = append(r.ks, c), n
			} else {
				r.vs, kv.V = append(r.vs, c), n
			}
		}
		o.KV = append(o.KV, kv)
	}
	r.mask = graph.FromFloat64s(dt, tensor.Shape{b, 1, 1, w}, r.maskv)
	o.Mask = graph.MaskNode(g, r.mask, graph.UniqueName(g, "decode_mask"))
	info, _ := posenc.InfoOf(lm.Pos.Name())
	r.noSlide, r.name = info.NoSlide, lm.Pos.Name()
	if info.DecodeTrue {
		r.feed, r.qt, r.kt = posenc.NewFeed(), make([]float64, b), make([]float64, b*w)
		pos, err := posenc.NewReal(b, r.qt, r.kt)
		if err != nil {
			return nil, err
		}
		pos.Feed = r.feed
		o.Pos = pos
	}
	if _, ok := lm.Pos.(posenc.StepAdder); ok {
		r.stepv = make([]float64, b*w)
		r.step = graph.FromFloat64s(dt, tensor.Shape{b, w}, r.stepv)
		o.StepPos = G.NewTensor(g, dt, 2, G.WithShape(b, w), G.WithValue(r.step), G.WithName(graph.UniqueName(g, "decode_positions")))
	}
	logits, err := lm.FwdWith(ids, o) // [B, V]
	if err != nil {
		return nil, errors.Wrapf(err, "decoder: B=%d W=%d", b, w)
	}
	G.Read(logits, r.logits)
	r.vm = G.NewTapeMachine(g)
	r.Reset()
	return r, nil
}

// CanDecode returns nil if the model cfg can decode incrementally, and
// otherwise an error with the encoding's reason (posenc.Info.NoDecode).
func CanDecode(cfg Config) error {
	return decodeCheck(cfg, "decode incrementally", func(i posenc.Info) string { return i.NoDecode })
}

// CanSlide returns nil if the decoding cache of the model cfg can slide
// past its window, and otherwise an error with the encoding's reason
// (posenc.Info.NoSlide: an absolute table decodes only while the whole
// context fits the window).
func CanSlide(cfg Config) error {
	return decodeCheck(cfg, "slide past the window", func(i posenc.Info) string { return i.NoSlide })
}

// CheckDecodeWindow returns nil if the model cfg decodes exactly with a
// window of w tokens, and otherwise an error with the encoding's limit
// and reason (posenc.DecodeLimiter: rope-dynamic up to its training
// length).
func CheckDecodeWindow(cfg Config, w int) error {
	name := cfg.Pos
	if name == "" {
		name = "none"
	}
	enc, err := posenc.New(name, cfg.PosOpts)
	if err != nil {
		return errors.WithMessage(err, "decoder")
	}
	if l, ok := enc.(posenc.DecodeLimiter); ok {
		if m, why := l.MaxDecodeWindow(); m > 0 && w > m {
			return errors.Errorf("decoder: %s decodes with a window of at most %d, not %d: %s", name, m, w, why)
		}
	}
	return nil
}

// decodeCheck is the error "decoder: NAME cannot WHAT: REASON" if the
// registry entry of cfg's encoding gives a reason, else nil.
func decodeCheck(cfg Config, what string, reason func(posenc.Info) string) error {
	name := cfg.Pos
	if name == "" {
		name = "none"
	}
	info, ok := posenc.InfoOf(name)
	if !ok {
		return errors.Errorf("decoder: unknown encoding %q", name)
	}
	if r := reason(info); r != "" {
		return errors.Errorf("decoder: %s cannot %s: %s", name, what, r)
	}
	return nil
}

// Reset empties the cache: the next Step starts new sequences.
func (r *Decoder) Reset() {
	clear(r.filled)
	clear(r.seen)
	for l := range r.ks {
		r.ks[l].reset()
		r.vs[l].reset()
	}
}

// Len returns the number of tokens sequence i stepped since Reset.
func (r *Decoder) Len(i int) int { return r.seen[i] }

// Skip is the id that Step takes for a sequence that has no token at this
// step: its cache is left as it is and its row of logits is undefined.
// Prompts of different lengths are fed right-aligned with it, and a
// sequence that has finished is skipped.
const Skip = -1

// Step feeds one token per sequence (len(ids) == B; Skip for none) and
// returns the logits [B, Vocab] (row-major) of each sequence's next token,
// as float64. The tokens' keys and values then join the cache.
func (r *Decoder) Step(ids []int) ([]float64, error) {
	if len(ids) != r.B {
		return nil, errors.Errorf("decoder: %d tokens, the decoder has B=%d", len(ids), r.B)
	}
	m := r.W - 1
	vocab := r.lm.Cfg.Vocab
	for i, id := range ids {
		if id != Skip && (id < 0 || id >= vocab) {
			return nil, errors.Errorf("decoder: token %d of sequence %d is outside the vocabulary [0, %d)", id, i, vocab)
		}
		if id != Skip && r.noSlide != "" && r.seen[i] >= r.W {
			return nil, errors.Errorf("decoder: sequence %d reaches position %d, past the window of %d: %s cannot slide (%s)", i, r.seen[i], r.W, r.name, r.noSlide)
		}
		if r.step != nil {
			row := r.stepv[i*r.W : (i+1)*r.W]
			clear(row)
			if id != Skip {
				row[r.seen[i]] = 1
			}
		}
		if r.feed != nil {
			// true positions: the cache's keys are the tokens before the
			// new one (no sliding), right-aligned; empty slots at 0
			r.qt[i] = float64(r.seen[i])
			row := r.kt[i*r.W : (i+1)*r.W]
			for j := range row {
				row[j] = float64(max(0, r.seen[i]-(m-j)))
			}
		}
		r.ids[i] = max(id, 0)
		row := r.maskv[i*r.W : (i+1)*r.W]
		for j := range row {
			row[j] = 0
			if j >= m-r.filled[i] {
				row[j] = 1
			}
		}
	}
	segSetFloats(r.mask, r.maskv)
	if r.step != nil {
		segSetFloats(r.step, r.stepv)
	}
	if r.feed != nil {
		pos, err := posenc.NewReal(r.B, r.qt, r.kt)
		if err == nil {
			err = r.feed.Bind(pos)
		}
		if err != nil {
			return nil, errors.WithMessage(err, "decoder: positions")
		}
	}
	err := r.vm.RunAll()
	r.vm.Reset()
	if err != nil {
		return nil, errors.Wrap(err, "decoder: run")
	}
	out := graph.ToFloat64s(*r.logits)
	// Every sequence's cache moves one slot left (none is skipped, and
	// none keeps sinks at the front of a full cache): the window slides
	// over the buffer instead of the rows over the window.
	shift := true
	for i, id := range ids {
		if id == Skip || r.Sinks > 0 && r.filled[i] >= m {
			shift = false
		}
	}
	for l := range r.ks {
		for _, c := range []*slideBuf{r.ks[l], r.vs[l]} {
			var err error
			if shift {
				err = c.shift()
			} else {
				err = slideCache(c.view, ids, r.W, r.Sinks, r.filled)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	for i, id := range ids {
		if id != Skip {
			r.filled[i] = min(m, r.filled[i]+1)
			r.seen[i]++
		}
	}
	return out, nil
}

// Close releases the machine and the store's record of the graph.
func (r *Decoder) Close() error {
	r.p.Forget(r.g)
	return r.vm.Close()
}

// slideCache moves the key or value the step wrote into the room (row
// w-1) of cache [B, w, d] into the cache, right-aligned, for the sequences
// whose id is not Skip: while it fills (filled < w-1) the filled rows and
// the new one move one slot left; once full, rows sinks+1..w-1 move left
// and rows 0..sinks-1 (the attention sinks) stay. A Skip sequence's room
// is left as the step wrote it (it is not part of its cache).
func slideCache(cache *tensor.Dense, ids []int, w, sinks int, filled []int) error {
	switch c := cache.Data().(type) {
	case []float64:
		slideRows(c, ids, w, sinks, filled)
	case []float32:
		slideRows(c, ids, w, sinks, filled)
	default:
		return errors.Errorf("decoder: cache of type %T", c)
	}
	return nil
}

func slideRows[F float32 | float64](cache []F, ids []int, w, sinks int, filled []int) {
	d := len(cache) / (len(ids) * w)
	for i, id := range ids {
		if id == Skip {
			continue
		}
		// the first row that moves goes to dst: the slot before the
		// filled ones, or the first after the sinks once the cache is full
		dst := w - 2 - filled[i]
		if filled[i] >= w-1 {
			dst = sinks
		}
		c := cache[i*w*d : (i+1)*w*d]
		copy(c[dst*d:], c[(dst+1)*d:]) // overlapping copy is safe
	}
}

// slideBuf is a decoding cache [B, W, d] (view) that is a window over a
// longer buffer of B·W + W rows: the slide that moves every sequence's
// rows one slot left (slideCache with no sequence skipped and no sinks
// kept) is the window moving one row right instead, without a copy. The
// row that enters at the end is the last sequence's room, and each
// sequence's room is the first row of the next one's, rows the step
// overwrites (KV.Room) before anything reads them; the rows that
// leave a sequence's front are its oldest (or empty, masked) slots.
// Once the window reaches the end of the buffer, its rows are copied back
// to the start (one copy of the cache every W shifts).
type slideBuf struct {
	node     *G.Node       // the cache input the view is bound to
	buf      *tensor.Dense // [(B·W + W)·d]
	view     *tensor.Dense // [B, W, d], rows off..off+B·W-1 of buf
	b, w, d  int
	off, max int // the window's first row, and its largest (W)
}

func newSlideBuf(dt tensor.Dtype, b, w, d int) *slideBuf {
	c := &slideBuf{b: b, w: w, d: d, max: w}
	c.buf = graph.FromFloat64s(dt, tensor.Shape{(b*w + c.max) * d}, make([]float64, (b*w+c.max)*d))
	c.view = c.window()
	return c
}

// window returns the view of rows off..off+B·W-1.
func (c *slideBuf) window() *tensor.Dense {
	lo, hi := c.off*c.d, (c.off+c.b*c.w)*c.d
	var back any
	switch x := c.buf.Data().(type) {
	case []float32:
		back = x[lo:hi:hi]
	case []float64:
		back = x[lo:hi:hi]
	}
	return tensor.New(tensor.WithShape(c.b, c.w, c.d), tensor.WithBacking(back))
}

// rebind makes the view that of the current offset and binds it.
func (c *slideBuf) rebind() error {
	c.view = c.window()
	if c.node == nil {
		return nil
	}
	return errors.Wrap(G.Let(c.node, c.view), "decoder: cache")
}

// shift moves the window one row right (copying it back to the start of
// the buffer when it would pass the end).
func (c *slideBuf) shift() error {
	if c.off < c.max {
		c.off++
		return c.rebind()
	}
	n, src := (c.b*c.w-1)*c.d, (c.off+1)*c.d
	switch x := c.buf.Data().(type) {
	case []float32:
		copy(x[:n], x[src:src+n])
	case []float64:
		copy(x[:n], x[src:src+n])
	}
	c.off = 0
	return c.rebind()
}

// reset zeroes the buffer and moves the window to its start.
func (c *slideBuf) reset() {
	segZero(c.buf)
	if c.off != 0 {
		c.off = 0
		if err := c.rebind(); err != nil {
			panic(err) // the view has the node's shape and dtype
		}
	}
}
