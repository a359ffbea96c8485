package layers

import (
	"fmt"
	"slices"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// ViTConfig is the configuration of the vision transformer classifier.
type ViTConfig struct {
	// Encoder is the Transformer: DModel, Heads, Layers, FFN, Eps, InitStd,
	// Pos, PosOpts and Stream as for the LM. Vocab is unused and Causal
	// must be false (every patch attends to every patch). Encoder.Stream
	// (config key stream) computes every block's attention with
	// graph.StreamAttention, in tiles of keys without a [B, H, T, T]
	// tensor: the 2-D biases (swin, swin-log, alibi-2d; dpb and the 1-D
	// biases on the raster order) as table lookups per tile, rope-2d and
	// the absolute encodings before it, as on a line.
	Encoder Config
	// Channels is the number of input channels (1 for MNIST), Patch the
	// side of a square patch in pixels, Classes the number of classes.
	Channels, Patch, Classes int
}

// The values of Config.ViTPool and Config.ViTClassPos.
const (
	// PoolMean averages the patches' final states (the default; timm's
	// global_pool='avg').
	PoolMean = "mean"
	// PoolCls prepends a learnable class token to the patches and
	// classifies from its final state (timm's class_token=True,
	// global_pool='token', its default).
	PoolCls = "cls"
	// ClassPosWith: the position encoding covers the class token (timm's
	// no_embed_class=False, its default: the learned table has a row for
	// it). ClassPosWithout: it does not (no_embed_class=True, DeiT III).
	ClassPosWith    = "with"
	ClassPosWithout = "without"
)

// ClassTokenStd is the init standard deviation of the class token, timm's
// (nn.init.normal_(self.cls_token, std=1e-6) in VisionTransformer.init_weights).
const ClassTokenStd = 1e-6

// noClassToken returns an error naming model if c asks for a class token
// or its position, options that only layers.ViT has.
func (c Config) noClassToken(model string) error {
	if c.ViTPool == PoolCls || c.ViTClassPos == ClassPosWithout {
		return errors.Errorf("%s: vit-pool %q and vit-cls-pos %q are options of the ViT; the %s has no class token", model, c.ViTPool, c.ViTClassPos, model)
	}
	return nil
}

// DefaultViTConfig is the vision study's reference model for 28×28
// grayscale digits: 4×4 patches (a 7×7 grid), d = 64, 4 heads, 3 blocks,
// FFN 128, 10 classes, no position encoding.
func DefaultViTConfig() ViTConfig {
	e := DefaultConfig()
	e.Vocab, e.DModel, e.Heads, e.Layers, e.FFN, e.Causal = 0, 64, 4, 3, 128, false
	return ViTConfig{Encoder: e, Channels: 1, Patch: 4, Classes: 10}
}

// PatchDim is the length of one flattened patch, Patch*Patch*Channels.
func (c ViTConfig) PatchDim() int { return c.Patch * c.Patch * c.Channels }

// Validate reports the first inconsistency in c, a class token with an
// encoding that has no rule for it included (see ViT).
func (c ViTConfig) Validate() error {
	e := c.Encoder
	e.Vocab = 1 // unused
	if err := e.Validate(); err != nil {
		return err
	}
	switch {
	case c.Encoder.Causal:
		return errors.New("vit: the encoder must not be causal")
	case c.Channels <= 0 || c.Patch <= 0 || c.Classes < 2:
		return errors.Errorf("vit: channels %d and patch %d must be positive and classes %d at least 2", c.Channels, c.Patch, c.Classes)
	case c.Encoder.ViTClassPos == ClassPosWithout && c.Encoder.ViTPool != PoolCls:
		return errors.Errorf("vit: vit-cls-pos without needs vit-pool cls (mean pooling has no class token)")
	}
	if c.Encoder.ViTPool == PoolCls { // refuse the encodings without a rule for the class token now
		enc, err := newPositionEncoding(c.Encoder)
		if err != nil {
			return err
		}
		if _, err := classModeOf(c.Encoder, enc); err != nil {
			return err
		}
	}
	return nil
}

// classMode is how a ViT places its class token.
type classMode int

const (
	// noClass: mean pooling, no class token.
	noClass classMode = iota
	// classOnLine: the encoding sees line positions and the class token is
	// token 0 of the line, the patches 1..T in raster order (every hook
	// acts on the class token as on any token).
	classOnLine
	// classOutside: the encoding's hooks act on the patches only (its input
	// term before the class token is prepended, its AfterBlocker on the
	// patch rows); the class token gets its row of a ClassTokenAdder (vit-cls-pos with)
	// or nothing (without). The blocks' attention knows no encoding.
	classOutside
)

// attentionHook names the first hook by which enc acts inside attention
// ("" if none): an encoding whose hooks would have to tell the class token
// from the patches there. The neutral hooks of a combination are not
// counted: its parts are.
func attentionHook(enc posenc.Encoding) string {
	if c, ok := posenc.AsCombined(enc); ok {
		for _, part := range c.Parts() {
			if h := attentionHook(part); h != "" {
				return h
			}
		}
		return ""
	}
	switch enc.(type) {
	case posenc.QKTransformer:
		return "rotation of q and k"
	case posenc.ScoreTermer:
		return "score terms"
	case posenc.ScoreBiaser:
		return "score bias"
	case posenc.ValueTermer:
		return "value terms"
	case posenc.Scaler:
		return "score scale"
	case posenc.StreamAttender:
		return "attention"
	}
	return ""
}

// classModeOf decides how a model of cfg with encoding enc places its class
// token, or refuses the combination with an error naming it (see ViT).
func classModeOf(cfg Config, enc posenc.Encoding) (classMode, error) {
	if cfg.ViTPool != PoolCls {
		return noClass, nil
	}
	grid := slices.Contains(posenc.Accepted(enc), posenc.PosGrid)
	with := cfg.ViTClassPos != ClassPosWithout
	name, clsPos := enc.Name(), ClassPosWith
	if !with {
		clsPos = ClassPosWithout
	}
	if !grid && with {
		return classOnLine, nil
	}
	if h := attentionHook(enc); h != "" {
		if !grid {
			return 0, errors.Errorf("vit: vit-pool cls with vit-cls-pos without and %s: its %s acts inside attention, where it would have to leave the class token out; "+
				"a 1-D encoding gives the class token line position 0 with vit-cls-pos with", name, h)
		}
		return 0, errors.Errorf("vit: vit-pool cls with %s (vit-cls-pos %s): its %s acts inside attention, where the class token would need a rule of its own "+
			"(timm's BEiT gives it bias entries of its own, rope-vit leaves it unrotated); not implemented: use vit-pool mean", name, clsPos, h)
	}
	_, adds := enc.(posenc.InputAdder)
	_, after := enc.(posenc.AfterBlocker)
	if _, ok := enc.(posenc.ClassTokenAdder); with && !ok && (adds || after) {
		return 0, errors.Errorf("vit: vit-pool cls with vit-cls-pos with and %s: it has no position for the class token "+
			"(learned-2d and sinusoidal-2d have a row for it, 1-D encodings give it line position 0); use vit-cls-pos without", name)
	}
	return classOutside, nil
}

// ViT is a vision transformer classifier (Dosovitskiy et al. 2021, "An
// Image is Worth 16x16 Words"), read top to bottom:
//
//	x = patches · W_patch + b_patch            // [B, T, d]   T = rows*cols patches in raster order
//	x = x + PE (input hook, if any)            // absolute encodings
//	x = Block_l(x), then the AfterBlock hook   // pre-LN blocks, bidirectional; CPE after block 1
//	y = mean_T LN_f(x)                         // [B, d]       mean pooling (the default)
//	logits = y · W_head + b_head               // [B, Classes]
//
// Positions: an encoding that serves grid positions (posenc.PosGrid in
// posenc.Accepted) receives the (row, col) of every patch; any other
// encoding receives line positions 0..T-1 over the raster order (the 1-D
// baselines on the flattened patch sequence). Parameters: patch_embed/w,
// patch_embed/b, block<l>/..., ln_f, head/w, head/b, plus the encoding's.
// Mean pooling (Encoder.ViTPool "mean", timm's global_pool='avg', with
// LN_f before the mean as here rather than timm's fc_norm after it) is the
// default, so that every encoding, relative ones included, sees only
// patches.
//
// With Encoder.ViTPool "cls" (timm's class_token=True, global_pool='token')
// a learnable class token "cls_token" [1, d] (init N(0, ClassTokenStd²),
// timm's; not decayed) is prepended to the patches, as timm's
// VisionTransformer._pos_embed does, and the head reads its final state:
//
//	c = cls_token (+ e_cls)                    // [B, 1, d]    e_cls: see below
//	x = [c; x + PE]                            // [B, 1+T, d]  the class token first
//	x = Block_l(x), AfterBlock on the patches  // every token attends to every token
//	y = LN_f(x)[:, 0]                          // [B, d]       the class token
//
// Encoder.ViTClassPos says whether the position encoding covers the class
// token: "with" (timm's no_embed_class=False: concatenate, then add a table
// with a row for the class token) or "without" (no_embed_class=True: add
// the table to the patches, then concatenate). What that means depends on
// the encoding, and the combinations without a rule are refused by NewViT
// with an error naming them:
//
//   - an encoding of line positions (none, the 1-D baselines): with, the
//     class token is token 0 of the line and the patches are 1..T (the
//     learned table's row 0 is the class token's, as timm's 1-D pos_embed);
//     every hook acts on it as on a patch. Without: the patches keep
//     0..T-1 and the class token gets nothing, which only an encoding that
//     acts on the input alone can do (learned, sinusoidal); the others are
//     refused.
//   - learned-2d: with, its row "pos_emb_2d_cls" [1, d], never resampled
//     (timm's resample_abs_pos_embed keeps the prefix rows); without,
//     nothing. sinusoidal-2d: a zero row either way (MAE's
//     get_2d_sincos_pos_embed(cls_token=True)).
//   - cpe: without only; the convolution after block 1 runs over the patch
//     rows and the class token passes unchanged (CPVT's PEG, Chu et al.
//     2023, Algorithm 1). With is refused: it gives the class token nothing.
//   - the encodings that act inside attention on grid positions (swin,
//     swin-log, alibi-2d, rope-2d, rope-mixed) are refused either way: the
//     class token has no grid offset, and a rule for it (BEiT's extra bias
//     entries, rope-vit's unrotated class token) is not implemented.
type ViT struct {
	Cfg    ViTConfig
	Pos    posenc.Encoding
	Patch  *Linear
	Blocks []*Block
	LNF    *LayerNorm
	Head   *Linear
	// Class is the class token [1, d] (Encoder.ViTPool "cls"), else nil.
	Class *G.Node
	mode  classMode
	g     *G.ExprGraph
	p     *graph.Params
}

// NewViT creates the model's parameters in p (or reuses them) and their
// nodes in g.
func NewViT(g *G.ExprGraph, p *graph.Params, cfg ViTConfig) (*ViT, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pos, err := newPositionEncoding(cfg.Encoder)
	if err != nil {
		return nil, err
	}
	mode, err := classModeOf(cfg.Encoder, pos)
	if err != nil {
		return nil, err
	}
	m := &ViT{Cfg: cfg, Pos: pos, mode: mode, g: g, p: p}
	d := cfg.Encoder.DModel
	if m.Patch, err = NewLinear(g, p, LinearConfig{Name: "patch_embed", In: cfg.PatchDim(), Out: d, Bias: true, InitStd: cfg.Encoder.InitStd}); err != nil {
		return nil, err
	}
	if mode != noClass {
		if m.Class, err = p.Node(g, "cls_token", tensor.Shape{1, d}, graph.Normal(ClassTokenStd), false); err != nil {
			return nil, err
		}
	}
	blockPos := pos
	if mode == classOutside {
		blockPos = nil // the encoding acts outside attention only (classModeOf)
	}
	if m.Blocks, m.LNF, err = newStack(g, p, cfg.Encoder, blockPos); err != nil {
		return nil, err
	}
	if m.Head, err = NewLinear(g, p, LinearConfig{Name: "head", In: d, Out: cfg.Classes, Bias: true, InitStd: cfg.Encoder.InitStd}); err != nil {
		return nil, err
	}
	return m, nil
}

// Grid returns the positions the model gives its encoding for a rows×cols
// patch grid: grid positions if the encoding serves them, nil (line
// positions over the raster order) otherwise.
func (m *ViT) Grid(rows, cols int) (*posenc.Positions, error) {
	if !slices.Contains(posenc.Accepted(m.Pos), posenc.PosGrid) {
		return nil, nil
	}
	return posenc.NewGrid(rows, cols)
}

// Fwd maps patches [B, rows*cols, PatchDim] (raster order of a rows×cols
// patch grid, as images.Patches writes them) to logits [B, Classes]. The
// grid may differ from the one the model was trained on; an encoding that
// cannot serve it (a learned table without resampling, a relative table
// too small) returns its error here, naming both grids.
func (m *ViT) Fwd(patches *G.Node, rows, cols int) (*G.Node, error) {
	sh := patches.Shape()
	if sh.Dims() != 3 || sh[2] != m.Cfg.PatchDim() {
		return nil, errors.Errorf("vit: patches have shape %v, want [B, T, %d]", sh, m.Cfg.PatchDim())
	}
	b, t, d := sh[0], sh[1], m.Cfg.Encoder.DModel
	if rows <= 0 || cols <= 0 || rows*cols != t {
		return nil, errors.Errorf("vit: a %dx%d patch grid has %d patches, the input has %d", rows, cols, rows*cols, t)
	}
	pos, err := m.Grid(rows, cols)
	if err != nil {
		return nil, err
	}
	flat, err := graph.Reshape(patches, b*t, sh[2]) // [B*T, P*P*C]
	if err != nil {
		return nil, err
	}
	if flat, err = m.Patch.Fwd(flat); err != nil { // [B*T, d]
		return nil, err
	}
	x, err := graph.Reshape(flat, b, t, d) // [B, T, d]
	if err != nil {
		return nil, err
	}
	if err := posenc.CheckKind(m.Pos, pos); err != nil {
		return nil, errors.WithMessage(err, "vit")
	}
	switch m.mode {
	case classOnLine:
		return m.fwdClassOnLine(x)
	case classOutside:
		return m.fwdClassOutside(x, pos)
	}
	if flat, err = encode(m.g, m.p, m.Cfg.Encoder, m.Pos, m.Blocks, m.LNF, x, pos, nil); err != nil { // [B*T, d]
		return nil, err
	}
	if x, err = graph.Reshape(flat, b, t, d); err != nil { // [B, T, d]
		return nil, err
	}
	pooled, err := G.Sum(x, 1) // [B, d]
	if err != nil {
		return nil, errors.Wrap(err, "vit: mean pooling")
	}
	if pooled, err = graph.Scale(pooled, 1/float64(t)); err != nil {
		return nil, err
	}
	return m.Head.Fwd(pooled) // [B, Classes]
}

// classTokens returns the class token repeated for b images, [B, 1, d].
func (m *ViT) classTokens(b int) (*G.Node, error) {
	ids := G.NewTensor(m.g, tensor.Int, 2, G.WithShape(b, 1), G.WithName(graph.UniqueName(m.g, "vit_cls_ids")),
		G.WithValue(tensor.New(tensor.WithShape(b, 1), tensor.WithBacking(make([]int, b)))))
	c, err := graph.Embedding(m.Class, ids) // [B, 1, d]
	return c, errors.WithMessage(err, "vit: class token")
}

// rows gathers rows of y [N, d] (row-major [B, 1+T, d] flattened): for each
// image b the rows b*(1+T)+from .. b*(1+T)+to-1, as [B, to-from, d].
func (m *ViT) rows(y *G.Node, b, t, from, to int) (*G.Node, error) {
	idx := make([]int, 0, b*(to-from))
	for bb := 0; bb < b; bb++ {
		for i := from; i < to; i++ {
			idx = append(idx, bb*(1+t)+i)
		}
	}
	ids := G.NewTensor(m.g, tensor.Int, 2, G.WithShape(b, to-from), G.WithName(graph.UniqueName(m.g, "vit_rows")),
		G.WithValue(tensor.New(tensor.WithShape(b, to-from), tensor.WithBacking(idx))))
	out, err := graph.Embedding(y, ids) // [B, to-from, d]
	return out, errors.WithMessage(err, "vit: token rows")
}

// classHead classifies from the class token's row of the final states flat
// [B*(1+T), d].
func (m *ViT) classHead(flat *G.Node, b, t int) (*G.Node, error) {
	c, err := m.rows(flat, b, t, 0, 1) // [B, 1, d]
	if err != nil {
		return nil, err
	}
	if c, err = graph.Reshape(c, b, m.Cfg.Encoder.DModel); err != nil { // [B, d]
		return nil, err
	}
	return m.Head.Fwd(c) // [B, Classes]
}

// fwdClassOnLine: the class token is token 0 of the line the encoding
// sees, the patches x [B, T, d] tokens 1..T.
func (m *ViT) fwdClassOnLine(x *G.Node) (*G.Node, error) {
	sh := x.Shape()
	b, t := sh[0], sh[1]
	c, err := m.classTokens(b)
	if err != nil {
		return nil, err
	}
	h, err := graph.Concat(1, c, x) // [B, 1+T, d]
	if err != nil {
		return nil, errors.Wrap(err, "vit: class token")
	}
	flat, err := encode(m.g, m.p, m.Cfg.Encoder, m.Pos, m.Blocks, m.LNF, h, nil, nil) // [B*(1+T), d]
	if err != nil {
		return nil, err
	}
	return m.classHead(flat, b, t)
}

// fwdClassOutside: the encoding's input term on the patches x [B, T, d]
// at pos, the class token (with its ClassTokenAdder row for vit-cls-pos
// with) prepended, the blocks (attention without the encoding), the
// encoding's AfterBlocker on the patch rows.
func (m *ViT) fwdClassOutside(x *G.Node, pos *posenc.Positions) (*G.Node, error) {
	cfg := m.Cfg.Encoder
	sh := x.Shape()
	b, t, d := sh[0], sh[1], sh[2]
	site := func(layer int, prefix string) *posenc.Site {
		return &posenc.Site{G: m.g, Params: m.p, Layer: layer, Prefix: prefix, B: b, H: cfg.Heads,
			DHead: d / cfg.Heads, DModel: d, Span: posenc.Span{TQ: t, TK: t}, Pos: pos}
	}
	var err error
	if ad, ok := m.Pos.(posenc.InputAdder); ok {
		if x, err = ad.AddToInput(site(-1, ""), x); err != nil { // [B, T, d]
			return nil, err
		}
	}
	c, err := m.classTokens(b)
	if err != nil {
		return nil, err
	}
	if ca, ok := m.Pos.(posenc.ClassTokenAdder); ok && cfg.ViTClassPos != ClassPosWithout {
		if c, err = ca.AddToClass(site(-1, ""), c); err != nil { // [B, 1, d]
			return nil, err
		}
	}
	h, err := graph.Concat(1, c, x) // [B, 1+T, d]
	if err != nil {
		return nil, errors.Wrap(err, "vit: class token")
	}
	span := posenc.Span{TQ: 1 + t, TK: 1 + t}
	after, _ := m.Pos.(posenc.AfterBlocker)
	for l, blk := range m.Blocks {
		if h, err = blk.FwdPositions(h, nil, span, nil, nil); err != nil { // [B, 1+T, d]
			return nil, err
		}
		if after == nil {
			continue
		}
		flat, err := graph.Reshape(h, b*(1+t), d)
		if err != nil {
			return nil, err
		}
		patches, err := m.rows(flat, b, t, 1, 1+t) // [B, T, d]
		if err != nil {
			return nil, err
		}
		y, err := after.AfterBlock(site(l, blk.Name), patches)
		if err != nil {
			return nil, err
		}
		if y == patches { // the hook does not act after this block (the gather stays in the graph: a [B, T, d] copy)
			continue
		}
		if c, err = m.rows(flat, b, t, 0, 1); err != nil { // [B, 1, d]
			return nil, err
		}
		if h, err = graph.Concat(1, c, y); err != nil { // [B, 1+T, d]
			return nil, errors.Wrap(err, "vit: class token")
		}
	}
	flat, err := graph.Reshape(h, b*(1+t), d)
	if err != nil {
		return nil, err
	}
	if flat, err = m.LNF.Fwd(flat); err != nil { // [B*(1+T), d]
		return nil, err
	}
	return m.classHead(flat, b, t)
}

// Learnables returns every parameter node of the model in its graph, the
// position encoding's included, sorted by name.
func (m *ViT) Learnables() G.Nodes { return m.p.Nodes(m.g) }

// String describes the model in one line.
func (c ViTConfig) String() string {
	e := c.Encoder
	pos := e.Pos
	if pos == "" {
		pos = "none"
	}
	s := fmt.Sprintf("vit pos=%s patch=%d d=%d heads=%d layers=%d ffn=%d classes=%d", pos, c.Patch, e.DModel, e.Heads, e.Layers, e.FFN, c.Classes)
	if e.ViTPool == PoolCls {
		cp := e.ViTClassPos
		if cp == "" {
			cp = ClassPosWith
		}
		s += " pool=cls cls-pos=" + cp
	}
	return s
}

// Probes returns the attention probe of each block, in order (see
// Attention.Probe and graph.AttentionProbe).
func (m *ViT) Probes() []*graph.AttentionProbe { return blockProbes(m.Blocks) }
