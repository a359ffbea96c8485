package visionstudy

import (
	"fmt"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/images"
	"github.com/rpe-go/rpe/experiments/viz"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// BiasMaps returns, per head, the score bias that the query patch at
// (qRow, qCol) of a rows×cols grid adds to every key patch, as a rows×cols
// matrix: the learned (Swin, swin-log) or fixed (alibi-2d) 2-D relative
// bias of block layer, read from the weights p through the encoding's
// ScoreBias hook. It returns an error if the encoding has no score bias or
// cannot serve the grid.
func BiasMaps(p *graph.Params, vit layers.ViTConfig, rows, cols, layer, qRow, qCol int) ([]viz.Matrix, error) {
	enc, err := posenc.New(vit.Encoder.Pos, vit.Encoder.PosOpts)
	if err != nil {
		return nil, err
	}
	bi, ok := enc.(posenc.ScoreBiaser)
	if !ok {
		return nil, errors.Errorf("bias maps: encoding %s adds no score bias", enc.Name())
	}
	if qRow < 0 || qRow >= rows || qCol < 0 || qCol >= cols {
		return nil, errors.Errorf("bias maps: query (%d, %d) is outside the %dx%d grid", qRow, qCol, rows, cols)
	}
	pos, err := posenc.NewGrid(rows, cols)
	if err != nil {
		return nil, err
	}
	g := G.NewGraph()
	defer p.Forget(g)
	h, d, t := vit.Encoder.Heads, vit.Encoder.DModel, rows*cols
	s := &posenc.Site{G: g, Params: p, Layer: layer, Prefix: fmt.Sprintf("block%d/attn", layer), B: 1, H: h, DHead: d / h, DModel: d,
		Span: posenc.Span{TQ: t, TK: t}, Pos: pos}
	bias, err := bi.ScoreBias(s) // [H|1, T, T] or [B|1, H|1, T, T]
	if err != nil {
		return nil, err
	}
	vals, err := run(g, bias)
	if err != nil {
		return nil, err
	}
	nh := bias.Shape()[bias.Dims()-3]
	q := qRow*cols + qCol
	out := make([]viz.Matrix, h)
	for hh := range out {
		src := min(hh, nh-1)
		m := make([]float64, t)
		copy(m, vals[(src*t+q)*t:(src*t+q+1)*t])
		if out[hh], err = viz.NewMatrix(rows, cols, m); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// AttentionMaps classifies image i of ds with the weights p and returns,
// per head of block layer, the attention probabilities of the query patch
// at (qRow, qCol) over the key patches, as matrices of the patch grid
// (with a class token, vit-pool cls, its column is left out: the rows sum
// to less than 1).
func AttentionMaps(p *graph.Params, vit layers.ViTConfig, ds *images.Dataset, i, layer, qRow, qCol int) ([]viz.Matrix, error) {
	rows, cols, err := images.Grid(ds, vit.Patch)
	if err != nil {
		return nil, err
	}
	if layer < 0 || layer >= vit.Encoder.Layers {
		return nil, errors.Errorf("attention maps: block %d does not exist (the model has %d)", layer, vit.Encoder.Layers)
	}
	if qRow < 0 || qRow >= rows || qCol < 0 || qCol >= cols {
		return nil, errors.Errorf("attention maps: query (%d, %d) is outside the %dx%d grid", qRow, qCol, rows, cols)
	}
	t, pd := rows*cols, vit.PatchDim()
	x := make([]float32, t*pd)
	if _, _, err := images.PatchBatch(ds, []int{i}, vit.Patch, x); err != nil {
		return nil, err
	}
	images.MNISTNorm.Apply(x)
	g := G.NewGraph()
	defer p.Forget(g)
	m, err := layers.NewViT(g, p, vit)
	if err != nil {
		return nil, err
	}
	xT := tensor.New(tensor.WithShape(1, t, pd), tensor.Of(p.Dtype()))
	graph.CopyFloat32s(xT, x)
	xN := G.NewTensor(g, p.Dtype(), 3, G.WithShape(1, t, pd), G.WithName("vit_patches"), G.WithValue(xT))
	if _, err := m.Fwd(xN, rows, cols); err != nil {
		return nil, err
	}
	probs := m.Blocks[layer].Attn.Probs() // [1, H, n, n], n = T (+1 for a class token, token 0)
	vals, err := run(g, probs)
	if err != nil {
		return nil, err
	}
	off := 0
	if m.Class != nil {
		off = 1
	}
	n, q := t+off, off+qRow*cols+qCol
	out := make([]viz.Matrix, vit.Encoder.Heads)
	for h := range out {
		row := make([]float64, t)
		copy(row, vals[(h*n+q)*n+off:(h*n+q+1)*n])
		if out[h], err = viz.NewMatrix(rows, cols, row); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// run executes g and returns n's value as float64s.
func run(g *G.ExprGraph, n *G.Node) ([]float64, error) {
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		return nil, err
	}
	return graph.ToFloat64s(n.Value()), nil
}
