package layers

import (
	"fmt"
	"slices"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"

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

// Validate reports the first inconsistency in c.
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
	}
	return nil
}

// ViT is a vision transformer classifier (Dosovitskiy et al. 2021, "An
// Image is Worth 16x16 Words"), read top to bottom:
//
//	x = patches · W_patch + b_patch            // [B, T, d]   T = rows*cols patches in raster order
//	x = x + PE (input hook, if any)            // absolute encodings
//	x = Block_l(x), then the AfterBlock hook   // pre-LN blocks, bidirectional; CPE after block 1
//	y = mean_T LN_f(x)                         // [B, d]       mean pooling, no class token
//	logits = y · W_head + b_head               // [B, Classes]
//
// Positions: an encoding that serves grid positions (posenc.PosGrid in
// posenc.Accepted) receives the (row, col) of every patch; any other
// encoding receives line positions 0..T-1 over the raster order (the 1-D
// baselines on the flattened patch sequence). Parameters: patch_embed/w,
// patch_embed/b, block<l>/..., ln_f, head/w, head/b, plus the encoding's.
// Mean pooling is used instead of a class token so that every encoding,
// relative ones included, sees only patches.
type ViT struct {
	Cfg    ViTConfig
	Pos    posenc.Encoding
	Patch  *Linear
	Blocks []*Block
	LNF    *LayerNorm
	Head   *Linear
	g      *G.ExprGraph
	p      *graph.Params
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
	m := &ViT{Cfg: cfg, Pos: pos, g: g, p: p}
	d := cfg.Encoder.DModel
	if m.Patch, err = NewLinear(g, p, LinearConfig{Name: "patch_embed", In: cfg.PatchDim(), Out: d, Bias: true, InitStd: cfg.Encoder.InitStd}); err != nil {
		return nil, err
	}
	if m.Blocks, m.LNF, err = newStack(g, p, cfg.Encoder, pos); err != nil {
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
	return fmt.Sprintf("vit pos=%s patch=%d d=%d heads=%d layers=%d ffn=%d classes=%d", pos, c.Patch, e.DModel, e.Heads, e.Layers, e.FFN, c.Classes)
}

// Probes returns the attention probe of each block, in order (see
// Attention.Probe and graph.AttentionProbe).
func (m *ViT) Probes() []*graph.AttentionProbe { return blockProbes(m.Blocks) }
