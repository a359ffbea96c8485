package layers

import (
	G "gorgonia.org/gorgonia"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// The encoder stack that ViT and GraphTransformer share: a position
// encoding, cfg.Layers bidirectional pre-LN blocks and a final LayerNorm
// over tokens [B, T, d]; each model adds its own input and head.

// newPositionEncoding returns the encoding cfg names ("" is "none").
func newPositionEncoding(cfg Config) (posenc.Encoding, error) {
	name := cfg.Pos
	if name == "" {
		name = "none"
	}
	return posenc.New(name, cfg.PosOpts)
}

// newStack creates the blocks block0..block<Layers-1> and ln_f, in that
// order (the order of parameter creation fixes the seeded initial values).
func newStack(g *G.ExprGraph, p *graph.Params, cfg Config, pos posenc.Encoding) ([]*Block, *LayerNorm, error) {
	var blocks []*Block
	for l := 0; l < cfg.Layers; l++ {
		b, err := NewBlock(g, p, cfg, l, pos)
		if err != nil {
			return nil, nil, err
		}
		blocks = append(blocks, b)
	}
	lnf, err := NewLayerNorm(g, p, "ln_f", cfg.DModel, cfg.Eps)
	if err != nil {
		return nil, nil, err
	}
	return blocks, lnf, nil
}

// encode runs tokens x [B, T, d] through the encoding's input term, the
// blocks (self-attention over the T tokens with positions pos, nil for
// their order, and mask [B|1, 1, T|1, T] or nil; the encoding's
// AfterBlocker between blocks) and ln_f, and returns [B*T, d].
func encode(g *G.ExprGraph, p *graph.Params, cfg Config, enc posenc.Encoding, blocks []*Block, lnf *LayerNorm,
	x *G.Node, pos *posenc.Positions, mask *G.Node) (*G.Node, error) {
	sh := x.Shape()
	b, t, d := sh[0], sh[1], sh[2]
	span := posenc.Span{TQ: t, TK: t}
	site := func(layer int, prefix string) *posenc.Site {
		return &posenc.Site{G: g, Params: p, Layer: layer, Prefix: prefix, B: b, H: cfg.Heads,
			DHead: d / cfg.Heads, DModel: d, Span: span, Pos: pos}
	}
	var err error
	if ad, ok := enc.(posenc.InputAdder); ok {
		if x, err = ad.AddToInput(site(-1, ""), x); err != nil { // [B, T, d]
			return nil, err
		}
	}
	after, _ := enc.(posenc.AfterBlocker)
	for l, blk := range blocks {
		if x, err = blk.FwdPositions(x, nil, span, pos, mask); err != nil { // [B, T, d]
			return nil, err
		}
		if after != nil {
			if x, err = after.AfterBlock(site(l, blk.Name), x); err != nil { // [B, T, d]
				return nil, err
			}
		}
	}
	flat, err := graph.Reshape(x, b*t, d) // [B*T, d]
	if err != nil {
		return nil, err
	}
	return lnf.Fwd(flat) // [B*T, d]
}
