package posenc

import (
	"math"

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
// "Conditional Positional Encodings for Vision Transformers" (ICLR; CPVT):
// the position encoding generator (PEG) after block After (1-based;
// the paper's choice is after the first block) reshapes the tokens to their
// grid and adds a depthwise Kernel×Kernel convolution of them, with bias,
// zero padding Kernel/2 and stride 1 (timm's PosConv with stride 1):
//
//	x[b, t, c] += bias[c] + Σ_(dy,dx) w[(dy+k/2)*k + dx+k/2, c] · x[b, t(r+dy, col+dx), c]
//
// where t(r, c) is the token at grid cell (r, c) and missing cells count as
// zero. It needs no table of positions: the convolution's zero padding
// tells a token where the border is, so it serves any grid size.
//
// Parameters "cpe/w" [Kernel², d] (row-major over (dy, dx), as a torch
// depthwise Conv2d weight [d, 1, k, k] transposed) and "cpe/b" [d], not
// weight-decayed (position parameters never are here). PyTorch initialises
// a depthwise Conv2d weight and bias U(-1/k, 1/k) (kaiming_uniform with
// a = √5 and fan-in k²); here w starts N(0, (1/(k√3))²), the same variance,
// and b at zero.
//
// Tokens may sit at any cells of the grid (s.Pos's coordinates, not the
// token order): for each of the k² offsets a constant 0/1 matrix S_o [T, T]
// (S_o[i, j] = 1 when token j sits at token i's cell plus the offset),
// computed on the host and cached per positions, so that
//
//	conv = Σ_o (S_o · X) ⊙ w_o,    X = x as [T, B·d]
//
// is one matrix product of the stacked S [k²T, T] with X, through checked
// ops only.
type CPE struct {
	// Kernel is the odd side of the convolution, After the 1-based block
	// after which it is added.
	Kernel, After int

	shifts tableCache[cpeKey, *tensor.Dense]
}

type cpeKey struct {
	pos    string
	kernel int
	dt     tensor.Dtype
}

// NewCPE returns the PEG with an odd kernel >= 1 after block afterBlock >= 1.
func NewCPE(kernel, afterBlock int) (*CPE, error) {
	if kernel < 1 || kernel%2 == 0 {
		return nil, errors.Errorf("posenc cpe: kernel %d must be odd and positive", kernel)
	}
	if afterBlock < 1 {
		return nil, errors.Errorf("posenc cpe: after block %d: blocks are numbered from 1", afterBlock)
	}
	return &CPE{Kernel: kernel, After: afterBlock}, nil
}

// Name implements Encoding.
func (*CPE) Name() string { return "cpe" }

// Accepts implements PositionAccepter: 2-D grid positions.
func (*CPE) Accepts() []PosKind { return []PosKind{PosGrid} }

// AfterBlock implements AfterBlocker: x [B, T, d] plus the convolution
// after block After (s.Layer == After-1), x itself after the others. A
// model with fewer blocks than After never adds it.
func (e *CPE) AfterBlock(s *Site, x *G.Node) (*G.Node, error) {
	if s.Layer != e.After-1 {
		return x, nil
	}
	if e.Kernel < 1 || e.Kernel%2 == 0 {
		return nil, errors.Errorf("posenc cpe: kernel %d must be odd and positive", e.Kernel)
	}
	p, t, d, err := absInputGrid("cpe", s, x)
	if err != nil {
		return nil, err
	}
	b, k2 := x.Shape()[0], e.Kernel*e.Kernel
	dt := x.Dtype()
	shift, err := e.shifts.get(cpeKey{pos: p.Key(), kernel: e.Kernel, dt: dt}, func() (*tensor.Dense, error) {
		return cpeShifts(p, e.Kernel, dt)
	})
	if err != nil {
		return nil, err
	}
	w, err := s.Params.Node(s.G, "cpe/w", tensor.Shape{k2, d}, graph.Normal(1/(float64(e.Kernel)*math.Sqrt(3))), false)
	if err != nil {
		return nil, errors.Wrap(err, "posenc cpe")
	}
	bias, err := s.Params.Node(s.G, "cpe/b", tensor.Shape{d}, graph.Constant(0), false)
	if err != nil {
		return nil, errors.Wrap(err, "posenc cpe")
	}
	sN := G.NewMatrix(s.G, dt, G.WithShape(k2*t, t), G.WithName(graph.UniqueName(s.G, "cpe_shifts")), G.WithValue(shift))
	xt, err := G.Transpose(x, 1, 0, 2) // [T, B, d]
	if err != nil {
		return nil, errors.Wrap(err, "posenc cpe")
	}
	xm, err := graph.Reshape(xt, t, b*d) // [T, B*d]
	if err != nil {
		return nil, err
	}
	sx, err := G.Mul(sN, xm) // [k²T, B*d]: the neighbour at each offset
	if err != nil {
		return nil, errors.Wrap(err, "posenc cpe")
	}
	if sx, err = graph.Reshape(sx, k2, t*b, d); err != nil { // [k², T*B, d]
		return nil, err
	}
	w3, err := graph.Reshape(w, k2, 1, d) // [k², 1, d]
	if err != nil {
		return nil, err
	}
	if sx, err = graph.BroadcastMul(sx, w3); err != nil { // [k², T*B, d]
		return nil, errors.Wrap(err, "posenc cpe")
	}
	conv, err := G.Sum(sx, 0) // [T*B, d]
	if err != nil {
		return nil, errors.Wrap(err, "posenc cpe")
	}
	if conv, err = graph.BroadcastAdd(conv, bias); err != nil { // [T*B, d]
		return nil, errors.Wrap(err, "posenc cpe")
	}
	if conv, err = graph.Reshape(conv, t, b, d); err != nil {
		return nil, err
	}
	if conv, err = G.Transpose(conv, 1, 0, 2); err != nil { // [B, T, d]
		return nil, errors.Wrap(err, "posenc cpe")
	}
	return graph.Add(x, conv)
}

// cpeShifts builds the stacked shift matrices S [k²*T, T] of the tokens of
// p: row o*T + i has a 1 in column j when token j sits at token i's cell
// plus offset o = (dy, dx), o = (dy+k/2)*k + dx+k/2. Two tokens at one cell
// are an error.
func cpeShifts(p *Positions, k int, dt tensor.Dtype) (*tensor.Dense, error) {
	rows, cols, t := p.Extent[0], p.Extent[1], p.TQ
	at := make([]int, rows*cols)
	for i := range at {
		at[i] = -1
	}
	for j := 0; j < t; j++ {
		r, c := p.QCoords[2*j], p.QCoords[2*j+1]
		if at[r*cols+c] >= 0 {
			return nil, errors.Errorf("posenc cpe: tokens %d and %d sit at the same grid cell (%d, %d)", at[r*cols+c], j, r, c)
		}
		at[r*cols+c] = j
	}
	h := k / 2
	data := make([]float64, k*k*t*t)
	for dy := -h; dy <= h; dy++ {
		for dx := -h; dx <= h; dx++ {
			o := (dy+h)*k + dx + h
			for i := 0; i < t; i++ {
				r, c := p.QCoords[2*i]+dy, p.QCoords[2*i+1]+dx
				if r < 0 || r >= rows || c < 0 || c >= cols {
					continue
				}
				if j := at[r*cols+c]; j >= 0 {
					data[(o*t+i)*t+j] = 1
				}
			}
		}
	}
	return graph.FromFloat64s(dt, tensor.Shape{k * k * t, t}, data), nil
}
