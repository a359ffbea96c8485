package posenc

import (
	"math/rand"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

func init() {
	register(Info{Name: "cpe", Kind: KindConditional, Learnable: true}, func(o Options) (Encoding, error) {
		return NewCPE(o.CPEKernel, o.CPEAfterBlock)
	})
}

// CPE is the conditional position encoding of Chu et al. 2023,
// "Conditional Positional Encodings for Vision Transformers" (ICLR 2023;
// arXiv 2102.10882, 2021): a position encoding generator (PEG) that
// computes the encoding from each token's neighbourhood instead of from a
// table. After block Block (1-based; the paper's and Twins' choice is 1:
// after the first block) the hidden states x [B, T, d] of the grid's tokens
// are seen as a [B, d, rows, cols] image, passed through a depthwise k×k
// convolution (groups = d, with bias, zero padding k/2, stride 1) and added:
//
//	y = x + DWConv(x)
//	DWConv(x)[b, (r, c), ch] = cpe/b[ch] + Σ_{u,v<k} cpe/w[u*k+v, ch] · x[b, (r+u-k/2, c+v-k/2), ch]
//
// as timm's PosConv (timm/models/twins.py, stride 1) and the CPVT code
// (PosCNN, released with Meituan-AutoML/Twins) compute it with
// nn.Conv2d(d, d, k, 1, k//2, groups=d) on x.transpose(1, 2).view(B, d, H,
// W). The convolution is PyTorch's (a cross-correlation): tap (u, v) reads
// the token u-k/2 rows below and v-k/2 columns right of the output token.
// Rows are the first grid axis (Positions.Extent[0]), columns the second.
//
// Tokens may sit at arbitrary grid coordinates (s.Pos.QCoords, in any
// order, with cells left out): the convolution reads each token's
// neighbours by coordinate, and a cell without a token counts as zero, as
// the zero padding outside the grid does. The neighbour table is built on
// the host once per (positions, kernel) and cached; the convolution is
// graph.DepthwiseConv. The encoding has no size: it serves any grid, the
// property the paper tests on larger inputs.
//
// Parameters, shared by the model (one PEG), created on first use:
//
//	cpe/w [k*k, d]  row u*k+v holds tap (u, v): cpe/w[u*k+v, ch] = torch weight[ch, 0, u, v]
//	cpe/b [d]
//
// both initialised as PyTorch's nn.Conv2d default, which the CPVT code keeps
// (DeiT's init touches only Linear and LayerNorm): kaiming-uniform with
// a = √5, i.e. U(-1/√fan_in, 1/√fan_in) with fan_in = k*k for a depthwise
// kernel, so U(-1/k, 1/k) for the weight and the bias alike. (Twins'
// _init_weights re-initialises its PosConv with N(0, 2/k²) and a zero bias;
// this library follows CPVT.) Neither is weight-decayed: both reference
// implementations exclude every PEG parameter from weight decay
// (no_weight_decay returns pos_block.*), and the library's convention is the
// same for position-encoding parameters.
//
// CPE implements AfterBlocker and serves grid positions only (PosGrid,
// two axes). It has no attention hooks: blocks other than Block see no
// position information from it.
type CPE struct {
	// Kernel is the side k of the convolution (odd, >= 1).
	Kernel int
	// Block is the 1-based block after which the PEG is applied.
	Block int
	cache tableCache[cpeKey, []int]
}

type cpeKey struct {
	pos    string
	kernel int
}

// NewCPE returns the conditional position encoding with a kernel×kernel
// convolution after block `after` (1-based). It returns an error if kernel
// is not a positive odd number or after < 1. A block after the model's last
// is never reached: the encoding then does nothing (the model knows its
// depth; the encoding does not).
func NewCPE(kernel, after int) (*CPE, error) {
	if kernel <= 0 || kernel%2 == 0 {
		return nil, errors.Errorf("posenc cpe: kernel %d must be a positive odd number (zero padding of k/2 keeps every token at the centre of its k×k window)", kernel)
	}
	if after < 1 {
		return nil, errors.Errorf("posenc cpe: CPEAfterBlock %d must be >= 1 (1 = after the first block)", after)
	}
	return &CPE{Kernel: kernel, Block: after}, nil
}

// Name implements Encoding.
func (*CPE) Name() string { return "cpe" }

// Accepts implements PositionAccepter: 2-D grid positions only.
func (*CPE) Accepts() []PosKind { return []PosKind{PosGrid} }

// AfterBlock implements AfterBlocker: x [B, T, d] after block s.Layer
// (0-based) is returned unchanged unless s.Layer == Block-1, where it
// becomes x + DWConv(x) [B, T, d]. It returns an error if s has no 2-D grid
// positions, if x is not [B, T, d] with T the number of positions, or if two
// tokens share a grid cell (see GridNeighbours).
func (e *CPE) AfterBlock(s *Site, x *G.Node) (*G.Node, error) {
	if s.Layer != e.Block-1 {
		return x, nil
	}
	sh := x.Shape()
	if sh.Dims() != 3 {
		return nil, errors.Errorf("posenc cpe: hidden states have shape %v, want [B, T, d]", sh)
	}
	if s.Pos == nil || s.Pos.Kind != PosGrid {
		return nil, errors.Errorf("posenc cpe: needs grid positions, the model gives it %s positions", s.Pos.Describe())
	}
	if s.Pos.TQ != sh[1] {
		return nil, errors.Errorf("posenc cpe: %s positions have %d tokens, the hidden states %v have %d", s.Pos.Describe(), s.Pos.TQ, sh, sh[1])
	}
	nbr, err := e.cache.get(cpeKey{s.Pos.Key(), e.Kernel}, func() ([]int, error) { return GridNeighbours(s.Pos, e.Kernel) })
	if err != nil {
		return nil, err
	}
	k, d := e.Kernel, sh[2]
	init := uniform(1 / float64(k))
	w, err := s.Params.Node(s.G, "cpe/w", tensor.Shape{k * k, d}, init, false)
	if err != nil {
		return nil, errors.WithMessage(err, "posenc cpe")
	}
	b, err := s.Params.Node(s.G, "cpe/b", tensor.Shape{d}, init, false)
	if err != nil {
		return nil, errors.WithMessage(err, "posenc cpe")
	}
	conv, err := graph.DepthwiseConv(x, w, b, nbr) // [B, T, d]
	if err != nil {
		return nil, errors.WithMessage(err, "posenc cpe")
	}
	return graph.BroadcastAdd(x, conv)
}

// GridNeighbours returns the neighbour table [T*k*k] of a k×k convolution
// over the queries of 2-D grid positions p (graph.DepthwiseConv's nbr): entry
// i*k*k + u*k + v is the index of the query at coordinate (r+u-k/2,
// c+v-k/2), where query i is at (r, c), or -1 if no query sits there (off
// the grid, or a cell without a token). It returns an error if p is not a
// 2-D grid, k is not a positive odd number, or two queries share a cell
// (the convolution would not know which to read).
func GridNeighbours(p *Positions, k int) ([]int, error) {
	if p == nil || p.Kind != PosGrid {
		return nil, errors.Errorf("posenc cpe: needs grid positions, got %s positions", p.Describe())
	}
	if len(p.Extent) != 2 {
		return nil, errors.Errorf("posenc cpe: needs a 2-D grid (rows, cols), got a %d-D %s", len(p.Extent), p.Describe())
	}
	if k <= 0 || k%2 == 0 {
		return nil, errors.Errorf("posenc cpe: kernel %d must be a positive odd number", k)
	}
	rows, cols := p.Extent[0], p.Extent[1]
	at := make([]int, rows*cols) // token at each cell + 1; 0 = none
	for i := 0; i < p.TQ; i++ {
		r, c := p.QCoords[2*i], p.QCoords[2*i+1]
		if r < 0 || r >= rows || c < 0 || c >= cols {
			return nil, errors.Errorf("posenc cpe: token %d at (%d, %d) is outside the %s", i, r, c, p.Describe())
		}
		if j := at[r*cols+c]; j != 0 {
			return nil, errors.Errorf("posenc cpe: tokens %d and %d both sit at grid cell (%d, %d) of the %s; the convolution needs one token per cell", j-1, i, r, c, p.Describe())
		}
		at[r*cols+c] = i + 1
	}
	h := k / 2
	nbr := make([]int, 0, p.TQ*k*k)
	for i := 0; i < p.TQ; i++ {
		r, c := p.QCoords[2*i], p.QCoords[2*i+1]
		for u := -h; u <= h; u++ {
			for v := -h; v <= h; v++ {
				rr, cc := r+u, c+v
				j := -1
				if rr >= 0 && rr < rows && cc >= 0 && cc < cols {
					j = at[rr*cols+cc] - 1
				}
				nbr = append(nbr, j)
			}
		}
	}
	return nbr, nil
}

// uniform returns a graph.Init drawing from U(-bound, bound).
func uniform(bound float64) graph.Init {
	return func(rng *rand.Rand, data []float64) {
		for i := range data {
			data[i] = (2*rng.Float64() - 1) * bound
		}
	}
}
