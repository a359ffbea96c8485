package layers

import (
	"fmt"
	"slices"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// Config is the one configuration struct of the language model.
type Config struct {
	Vocab   int     // 256 for bytes
	DModel  int     // model width d
	Heads   int     // attention heads H (d % H == 0)
	Layers  int     // number of blocks
	FFN     int     // feed-forward width
	Eps     float64 // LayerNorm epsilon
	InitStd float64 // std of the N(0, std²) init of weights and embeddings
	Causal  bool    // language modelling: keys after the query are masked
	// Pos names the position encoding (posenc.Names()); "" means "none".
	Pos     string
	PosOpts posenc.Options
	// Stream computes every attention with graph.StreamAttention, in tiles
	// of keys without a [B, H, T, T] tensor (AttentionConfig.Stream; the
	// trainer's -stream). It serves the encodings of posenc.StreamBias
	// (no terms, table biases) and the posenc.StreamTermers (shaw, xl,
	// deberta: terms per tile) and the posenc.StreamAttenders (cope,
	// fire), and refuses the others when the model is built. A mask
	// (Options.Mask) must then be a key-padding mask [B|1, 1, 1, T], read
	// each time the graph runs (graph.StreamOpts.KeyPad); cope takes none.
	Stream bool
	// ViTPool and ViTClassPos configure layers.ViT only (see ViT): how it
	// pools its tokens for the head, "mean" over the patches (the default;
	// "" too) or "cls", a class token prepended to the patches (timm's
	// global_pool 'avg' and 'token'); and whether the position encoding
	// covers that class token, "with" (the default, timm's
	// no_embed_class=False) or "without" (no_embed_class=True). The other
	// models have no class token and refuse "cls" and "without".
	ViTPool     string `opt:"vit-pool"`
	ViTClassPos string `opt:"vit-cls-pos"`
}

// DefaultConfig is the reference configuration: vocab 256, d_model 128,
// 4 heads, 2 layers, FFN 512 with GELU (tanh), pre-LayerNorm with eps 1e-5,
// final LayerNorm, untied output head without bias, N(0, 0.02) init, causal,
// no position encoding.
func DefaultConfig() Config {
	return Config{Vocab: 256, DModel: 128, Heads: 4, Layers: 2, FFN: 512, Eps: 1e-5, InitStd: 0.02, Causal: true, Pos: "none"}
}

// Resolved returns c with every default filled in: Pos "" becomes "none"
// and PosOpts is PosOpts.Resolve(DModel) (all encoding defaults, the
// sinusoidal scale 1/√DModel included). A model built from c.Resolved()
// computes bit for bit what a model built from c does; record the resolved
// config to keep the values a run used rather than zeros.
func (c Config) Resolved() Config {
	if c.Pos == "" {
		c.Pos = "none"
	}
	if c.ViTPool == "" {
		c.ViTPool = PoolMean
	}
	if c.ViTClassPos == "" {
		c.ViTClassPos = ClassPosWith
	}
	c.PosOpts = c.PosOpts.Resolve(c.DModel)
	return c
}

// Validate reports the first inconsistency in c.
func (c Config) Validate() error {
	switch {
	case c.Vocab <= 0, c.DModel <= 0, c.Heads <= 0, c.Layers <= 0, c.FFN <= 0:
		return errors.Errorf("layers: vocab %d, d_model %d, heads %d, layers %d and ffn %d must all be positive", c.Vocab, c.DModel, c.Heads, c.Layers, c.FFN)
	case c.DModel%c.Heads != 0:
		return errors.Errorf("layers: d_model %d is not a multiple of heads %d", c.DModel, c.Heads)
	case c.Eps <= 0:
		return errors.Errorf("layers: LayerNorm eps %g must be positive", c.Eps)
	case c.InitStd < 0:
		return errors.Errorf("layers: init std %g must not be negative", c.InitStd)
	case c.ViTPool != "" && c.ViTPool != PoolMean && c.ViTPool != PoolCls:
		return errors.Errorf("layers: vit-pool %q (valid: %s, %s)", c.ViTPool, PoolMean, PoolCls)
	case c.ViTClassPos != "" && c.ViTClassPos != ClassPosWith && c.ViTClassPos != ClassPosWithout:
		return errors.Errorf("layers: vit-cls-pos %q (valid: %s, %s)", c.ViTClassPos, ClassPosWith, ClassPosWithout)
	}
	return nil
}

// Block is a pre-LayerNorm Transformer block:
//
//	x = x + Attn(LN1(x))
//	x = x + FFN(LN2(x))
//
// with parameters blockI/ln1, blockI/attn, blockI/ln2, blockI/ffn.
type Block struct {
	Name     string
	LN1, LN2 *LayerNorm
	Attn     *Attention
	FFN      *FeedForward
}

// NewBlock creates block number layer (0-based) of cfg in g.
func NewBlock(g *G.ExprGraph, p *graph.Params, cfg Config, layer int, pos posenc.Encoding) (*Block, error) {
	name := fmt.Sprintf("block%d", layer)
	b := &Block{Name: name}
	var err error
	if b.LN1, err = NewLayerNorm(g, p, name+"/ln1", cfg.DModel, cfg.Eps); err != nil {
		return nil, err
	}
	if b.Attn, err = NewAttention(g, p, AttentionConfig{Name: name + "/attn", Layer: layer, D: cfg.DModel, Heads: cfg.Heads,
		InitStd: cfg.InitStd, Causal: cfg.Causal, Pos: pos, Stream: cfg.Stream}); err != nil {
		return nil, err
	}
	if b.LN2, err = NewLayerNorm(g, p, name+"/ln2", cfg.DModel, cfg.Eps); err != nil {
		return nil, err
	}
	if b.FFN, err = NewFeedForward(g, p, name+"/ffn", cfg.DModel, cfg.FFN, cfg.InitStd); err != nil {
		return nil, err
	}
	return b, nil
}

// Fwd maps x [B, T, d] to [B, T, d]. mem is nil or a node [B, M, d] of
// memory states (e.g. the previous segment's inputs to this block, held
// without gradient) prepended to the keys and values; span must then place
// the keys accordingly (KStart = QStart - M, TK = M + T). mask is as in
// Attention.Fwd.
func (b *Block) Fwd(x, mem *G.Node, span posenc.Span, mask *G.Node) (*G.Node, error) {
	return b.FwdPositions(x, mem, span, nil, mask)
}

// FwdPositions is Fwd with positions beyond a line (see
// Attention.FwdPositions).
func (b *Block) FwdPositions(x, mem *G.Node, span posenc.Span, pos *posenc.Positions, mask *G.Node) (*G.Node, error) {
	d := x.Shape()[2]
	h, err := b.LN1.Fwd(x) // [B, T, d]
	if err != nil {
		return nil, err
	}
	kv := h
	if mem != nil {
		ms := mem.Shape()
		if ms.Dims() != 3 || ms[2] != d {
			return nil, errors.Errorf("%s: memory shape %v, want [B, M, %d]", b.Name, ms, d)
		}
		m, err := b.LN1.Fwd(mem) // [B, M, d]
		if err != nil {
			return nil, err
		}
		if kv, err = graph.Concat(1, m, h); err != nil { // [B, M+T, d]
			return nil, errors.Wrapf(err, "%s: concat memory", b.Name)
		}
	}
	a, err := b.Attn.FwdPositions(h, kv, span, pos, mask) // [B, T, d]
	if err != nil {
		return nil, err
	}
	if x, err = graph.Add(x, a); err != nil {
		return nil, err
	}
	if h, err = b.LN2.Fwd(x); err != nil {
		return nil, err
	}
	if h, err = b.FFN.Fwd(h); err != nil { // [B, T, d]
		return nil, err
	}
	return graph.Add(x, h)
}

// FwdCached is Fwd against cached keys and values (Attention.FwdCached):
// x [B, T, d] attends to mem's M projected keys and values, then to itself;
// span places the cache and x (TK = M+T). It returns [B, T, d] and x's own
// projected keys and values [B, T, d] for the caller's cache.
func (b *Block) FwdCached(x *G.Node, mem KV, span posenc.Span, pos *posenc.Positions, mask *G.Node) (*G.Node, KV, error) {
	h, err := b.LN1.Fwd(x) // [B, T, d]
	if err != nil {
		return nil, KV{}, err
	}
	a, kv, err := b.Attn.FwdCached(h, mem, span, pos, mask) // [B, T, d]
	if err != nil {
		return nil, KV{}, err
	}
	if x, err = graph.Add(x, a); err != nil {
		return nil, KV{}, err
	}
	if h, err = b.LN2.Fwd(x); err != nil {
		return nil, KV{}, err
	}
	if h, err = b.FFN.Fwd(h); err != nil { // [B, T, d]
		return nil, KV{}, err
	}
	x, err = graph.Add(x, h)
	return x, kv, err
}

// Learnables returns the block's parameters.
func (b *Block) Learnables() G.Nodes {
	ns := append(b.LN1.Learnables(), b.Attn.Learnables()...)
	ns = append(ns, b.LN2.Learnables()...)
	return append(ns, b.FFN.Learnables()...)
}

// LM is the language model: token embedding (tok_emb) plus the position
// encoding's input term, Layers pre-LayerNorm blocks, a final LayerNorm
// (ln_f) and an untied output head without bias (head/w [d, Vocab]).
type LM struct {
	Cfg    Config
	Pos    posenc.Encoding
	Emb    *Embedding
	Blocks []*Block
	LNF    *LayerNorm
	Head   *Linear
	g      *G.ExprGraph
	p      *graph.Params
	hidden []*G.Node
	kvNew  []KV
}

// NewLM creates the model's parameters in p (or reuses them: every graph
// built from one Params shares its weights) and their nodes in g.
func NewLM(g *G.ExprGraph, p *graph.Params, cfg Config) (*LM, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.noClassToken("lm"); err != nil {
		return nil, err
	}
	name := cfg.Pos
	if name == "" {
		name = "none"
	}
	pos, err := posenc.New(name, cfg.PosOpts)
	if err != nil {
		return nil, err
	}
	if a := posenc.Accepted(pos); !slices.Contains(a, posenc.PosLine) && !slices.Contains(a, posenc.PosPairwise) {
		return nil, errors.WithMessage(posenc.CheckKind(pos, nil), "lm")
	}
	m := &LM{Cfg: cfg, Pos: pos, g: g, p: p}
	if m.Emb, err = NewEmbedding(g, p, "tok_emb", cfg.Vocab, cfg.DModel, cfg.InitStd); err != nil {
		return nil, err
	}
	for l := 0; l < cfg.Layers; l++ {
		b, err := NewBlock(g, p, cfg, l, pos)
		if err != nil {
			return nil, err
		}
		m.Blocks = append(m.Blocks, b)
	}
	if m.LNF, err = NewLayerNorm(g, p, "ln_f", cfg.DModel, cfg.Eps); err != nil {
		return nil, err
	}
	if m.Head, err = NewLinear(g, p, LinearConfig{Name: "head", In: cfg.DModel, Out: cfg.Vocab, InitStd: cfg.InitStd}); err != nil {
		return nil, err
	}
	return m, nil
}

// Options are the optional inputs of LM.FwdWith.
type Options struct {
	// Start is the absolute position of the first token (default 0).
	Start int
	// Mask is nil or a float node [B|1, 1, T, T] (1 attend, 0 blocked), for
	// example a padding mask from graph.PaddingMask; it is combined with the
	// causal mask. With Mems its last axis spans memory and tokens.
	Mask *G.Node
	// Mems, if not nil, holds one node per block [B, M, d]: states of the
	// previous segment (Transformer-XL's memory, Dai et al. 2019) prepended
	// to that block's keys and values. Bind them as plain input nodes (no
	// gradient flows into them); the keys then sit at Start-M..Start+T-1.
	Mems []*G.Node
	// Pos, if not nil, are per-example positions beyond the token order,
	// passed to the position encoding's hooks (Site.Pos) at the input, in
	// every block and after each block: the pairwise syntax-tree relations
	// [B, T, T] of a code model (posenc.NewPairwise), or the real times of
	// B sequences of T events (posenc.NewReal(B, qTimes, kTimes), each
	// [B*T]; the causal mask stays by index); with a posenc.Feed to rebind
	// them per batch. Without Mems they must be self-attention
	// positions of the T tokens. An encoding that needs them (tree) and
	// gets none, or gets a kind it does not serve, is an error naming
	// both. A combined encoding's 1-D part ("tree+rope") sees the span.
	Pos *posenc.Positions
	// KV, if not nil, holds one cache per block of projected keys and
	// values [B, M, d] (Attention.FwdCached): the tokens attend to them and
	// to themselves, the cache sitting at Start-M..Start-1. Exclusive with
	// Mems. LM.CachedKV returns the tokens' own keys and values to append.
	// With KV.Room the caches are [B, M+T, d], their last T rows the room
	// the tokens' keys and values are written into (the cache still sits
	// at Start-M..Start-1).
	KV []KV
	// StepPos, with KV, is a float input [B, P] holding a 1 at each new
	// token's absolute position (a single token per sequence): an absolute
	// table (posenc.StepAdder) adds those rows instead of the span's
	// (layers.Decoder). Other encodings ignore it.
	StepPos *G.Node
}

// Fwd maps ids [B, T] (tensor.Int) at positions 0..T-1 to logits [B*T, Vocab].
func (m *LM) Fwd(ids *G.Node) (*G.Node, error) { return m.FwdWith(ids, Options{}) }

// FwdAt is Fwd with the first token at absolute position start.
func (m *LM) FwdAt(ids *G.Node, start int) (*G.Node, error) {
	return m.FwdWith(ids, Options{Start: start})
}

// FwdWith maps ids [B, T] to logits [B*T, Vocab] with the given options. An
// encoding that cannot serve the positions (a learned table shorter than
// Start+T) returns its error here, when the graph is built.
func (m *LM) FwdWith(ids *G.Node, o Options) (*G.Node, error) {
	sh := ids.Shape()
	if sh.Dims() != 2 {
		return nil, errors.Errorf("lm: ids have shape %v, want [B, T]", sh)
	}
	b, t, d := sh[0], sh[1], m.Cfg.DModel
	span := posenc.Span{QStart: o.Start, TQ: t, KStart: o.Start, TK: t}
	if o.Mems != nil && len(o.Mems) != len(m.Blocks) {
		return nil, errors.Errorf("lm: %d memories for %d blocks", len(o.Mems), len(m.Blocks))
	}
	mem := func(l int) *G.Node {
		if o.Mems == nil {
			return nil
		}
		return o.Mems[l]
	}
	if mm := mem(0); mm != nil {
		ms := mm.Shape()
		if ms.Dims() != 3 || ms[0] != b || ms[2] != d {
			return nil, errors.Errorf("lm: memory has shape %v, want [%d, M, %d]", ms, b, d)
		}
		span.KStart, span.TK = o.Start-ms[1], ms[1]+t
	}
	if o.KV != nil {
		if o.Mems != nil {
			return nil, errors.New("lm: Mems and KV are exclusive")
		}
		if len(o.KV) != len(m.Blocks) {
			return nil, errors.Errorf("lm: %d key/value caches for %d blocks", len(o.KV), len(m.Blocks))
		}
		if o.KV[0].K == nil {
			return nil, errors.New("lm: key/value cache without keys")
		}
		mk := o.KV[0].K.Shape()[1]
		if o.KV[0].Room { // the cache's last t rows are the tokens' own
			mk -= t
		}
		span.KStart, span.TK = o.Start-mk, mk+t
	}
	if err := posenc.CheckKind(m.Pos, o.Pos); err != nil {
		return nil, errors.WithMessage(err, "lm")
	}
	x, err := m.Emb.Fwd(ids) // [B, T, d]
	if err != nil {
		return nil, err
	}
	if ad, ok := m.Pos.(posenc.InputAdder); ok {
		site := &posenc.Site{G: m.g, Params: m.p, Layer: -1, Prefix: "", B: b, H: m.Cfg.Heads, DHead: d / m.Cfg.Heads, DModel: d, Span: span, Pos: o.Pos, Causal: m.Cfg.Causal}
		sa, step := m.Pos.(posenc.StepAdder)
		switch {
		case o.StepPos != nil && step:
			x, err = sa.AddAtSteps(site, x, o.StepPos) // [B, 1, d]
		case o.StepPos != nil:
			err = errors.Errorf("lm: %s cannot add positions given per step", m.Pos.Name())
		default:
			x, err = ad.AddToInput(site, x) // [B, T, d]
		}
		if err != nil {
			return nil, err
		}
	}
	m.hidden, m.kvNew = m.hidden[:0], m.kvNew[:0]
	after, _ := m.Pos.(posenc.AfterBlocker)
	for l, blk := range m.Blocks {
		m.hidden = append(m.hidden, x)
		if o.KV != nil {
			var kv KV
			if x, kv, err = blk.FwdCached(x, o.KV[l], span, o.Pos, o.Mask); err != nil {
				return nil, err
			}
			m.kvNew = append(m.kvNew, kv)
		} else if x, err = blk.FwdPositions(x, mem(l), span, o.Pos, o.Mask); err != nil {
			return nil, err
		}
		if after != nil {
			site := &posenc.Site{G: m.g, Params: m.p, Layer: l, Prefix: blk.Name, B: b, H: m.Cfg.Heads, DHead: d / m.Cfg.Heads,
				DModel: d, Span: posenc.Span{QStart: o.Start, TQ: t, KStart: o.Start, TK: t}, Pos: o.Pos, Causal: m.Cfg.Causal}
			if x, err = after.AfterBlock(site, x); err != nil { // [B, T, d]
				return nil, err
			}
		}
	}
	flat, err := graph.Reshape(x, b*t, d) // [B*T, d]
	if err != nil {
		return nil, err
	}
	if flat, err = m.LNF.Fwd(flat); err != nil {
		return nil, err
	}
	return m.Head.Fwd(flat) // [B*T, Vocab]
}

// Learnables returns every parameter node of the model in its graph, the
// position encoding's included, sorted by name.
func (m *LM) Learnables() G.Nodes { return m.p.Nodes(m.g) }

// Probes returns the attention probe of each block, in order (see
// Attention.Probe and graph.AttentionProbe).
func (m *LM) Probes() []*graph.AttentionProbe { return blockProbes(m.Blocks) }

// blockProbes returns the attention probes of blocks, in order.
func blockProbes(blocks []*Block) []*graph.AttentionProbe {
	ps := make([]*graph.AttentionProbe, len(blocks))
	for i, b := range blocks {
		ps[i] = b.Attn.Probe()
	}
	return ps
}

// Hidden returns the input [B, T, d] of each block of the last FwdWith: the
// states a Transformer-XL style caller copies into the next segment's Mems.
func (m *LM) Hidden() []*G.Node { return append([]*G.Node(nil), m.hidden...) }

// CachedKV returns, after a FwdWith with Options.KV, each block's projected
// keys and values [B, T, d] of the tokens of that call (nil otherwise).
func (m *LM) CachedKV() []KV { return append([]KV(nil), m.kvNew...) }
