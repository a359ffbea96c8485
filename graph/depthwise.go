package graph

import (
	"fmt"
	"hash"
	"hash/fnv"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// DepthwiseConv is a depthwise convolution over tokens whose neighbours are
// given by a host table, so that it works on any arrangement of tokens (a
// grid in raster order, a shuffled grid, a grid with holes):
//
//	y[b, i, c] = bias[c] + Σ_o w[o, c] · x[b, nbr[i*K+o], c]     (terms with nbr = -1 are 0)
//
// x is [B, T, d], w [K, d] (one row per kernel tap o), bias [d], nbr a
// host table of T*K token indices in [-1, T); y has x's shape. For a k×k
// convolution with zero padding on a grid, tap o = u*k + v of token i at
// (r, c) is the token at (r+u-k/2, c+v-k/2), or -1 outside the grid: this
// is PyTorch's conv2d(x, weight [d, 1, k, k], bias, padding=k/2,
// groups=d) with w[u*k+v, c] = weight[c, 0, u, v].
//
// The gradients are those of the sum: dx is the transposed gather
// (dx[b, j, c] = Σ over (i, o) with nbr[i*K+o] = j of dy[b, i, c]·w[o, c]),
// dw[o, c] = Σ_{b,i} dy[b, i, c]·x[b, nbr[i*K+o], c] and dbias the sum of dy
// over B and T. nbr is copied. It returns an error naming the shapes if
// they disagree, an entry of nbr is outside [-1, T), or the dtypes differ.
func DepthwiseConv(x, w, bias *G.Node, nbr []int) (*G.Node, error) {
	const name = "DepthwiseConv"
	for _, c := range []struct {
		what string
		n    *G.Node
	}{{"x", x}, {"w", w}, {"bias", bias}} {
		if err := checkFloatNode(name, c.what, c.n); err != nil {
			return nil, err
		}
	}
	xs, ws, bs := x.Shape(), w.Shape(), bias.Shape()
	if len(xs) != 3 {
		return nil, errors.Errorf("graph: DepthwiseConv: x %v must be [B, T, d]", xs)
	}
	bb, t, d := xs[0], xs[1], xs[2]
	if len(ws) != 2 || ws[1] != d || ws[0] <= 0 {
		return nil, errors.Errorf("graph: DepthwiseConv: w %v must be [K, %d] for x %v", ws, d, xs)
	}
	k := ws[0]
	if len(bs) != 1 || bs[0] != d {
		return nil, errors.Errorf("graph: DepthwiseConv: bias %v must be [%d] for x %v", bs, d, xs)
	}
	if w.Dtype() != x.Dtype() || bias.Dtype() != x.Dtype() {
		return nil, errors.Errorf("graph: DepthwiseConv: dtypes differ: x %v, w %v, bias %v", x.Dtype(), w.Dtype(), bias.Dtype())
	}
	if len(nbr) != t*k {
		return nil, errors.Errorf("graph: DepthwiseConv: %d neighbour entries, want T*K = %d*%d = %d", len(nbr), t, k, t*k)
	}
	for n, j := range nbr {
		if j < -1 || j >= t {
			return nil, errors.Errorf("graph: DepthwiseConv: neighbour %d of token %d is %d, outside [-1, %d)", n%k, n/k, j, t)
		}
	}
	tab := newDWTable(nbr, t, k)
	return G.ApplyOp(&dwConvOp{dwShape: dwShape{b: bb, t: t, k: k, d: d}, tab: tab}, x, w, bias)
}

// dwShape holds the sizes of a DepthwiseConv: x [b, t, d], w [k, d].
type dwShape struct{ b, t, k, d int }

// dwTable is the neighbour table of a DepthwiseConv and its transpose (for
// each token j, the (i, o) with nbr[i*K+o] = j, in CSR form), shared by the
// op and its gradient ops.
type dwTable struct {
	nbr         []int
	invStart    []int // [T+1]
	invI, invO  []int
	fingerprint string
}

func newDWTable(nbr []int, t, k int) *dwTable {
	tab := &dwTable{nbr: append([]int(nil), nbr...), invStart: make([]int, t+1)}
	for _, j := range nbr {
		if j >= 0 {
			tab.invStart[j+1]++
		}
	}
	for j := 0; j < t; j++ {
		tab.invStart[j+1] += tab.invStart[j]
	}
	n := tab.invStart[t]
	tab.invI, tab.invO = make([]int, n), make([]int, n)
	next := append([]int(nil), tab.invStart[:t]...)
	for i := 0; i < t; i++ {
		for o := 0; o < k; o++ {
			if j := nbr[i*k+o]; j >= 0 {
				tab.invI[next[j]], tab.invO[next[j]] = i, o
				next[j]++
			}
		}
	}
	h := fnv.New64a()
	fmt.Fprint(h, nbr)
	tab.fingerprint = fmt.Sprintf("%016x", h.Sum64())
	return tab
}

// dwConvOp: x [B, T, d], w [K, d], bias [d] -> y [B, T, d].
type dwConvOp struct {
	opBase
	dwShape
	tab *dwTable
	res buf
}

func (op *dwConvOp) Arity() int { return 3 }
func (op *dwConvOp) Type() hm.Type {
	return hm.NewFnType(floatT(3), floatT(2), floatT(1), floatT(3))
}
func (op *dwConvOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{op.b, op.t, op.d}, nil
}
func (op *dwConvOp) String() string {
	return fmt.Sprintf("DepthwiseConv{B=%d, T=%d, K=%d, d=%d, nbr=%s}", op.b, op.t, op.k, op.d, op.tab.fingerprint)
}
func (op *dwConvOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *dwConvOp) Hashcode() uint32      { return hashOf(op) }
func (op *dwConvOp) DiffWRT(int) []bool    { return []bool{true, true, true} }

func (op *dwConvOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	x, w := in[0], in[1]
	dx, err := G.ApplyOp(&dwConvGradOp{dwShape: op.dwShape, tab: op.tab}, w, grad)
	if err != nil {
		return nil, err
	}
	dw, err := G.ApplyOp(&dwConvGradOp{dwShape: op.dwShape, tab: op.tab, wrtW: true}, x, grad)
	if err != nil {
		return nil, err
	}
	db, err := broadcastReduce(grad, tensor.Shape{op.d})
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx, dw, db}, nil
}

func (op *dwConvOp) Do(vs ...G.Value) (G.Value, error) {
	return dispatch(op, op, vs,
		func() (G.Value, error) { return dwConvDo[float32](op, vs) },
		func() (G.Value, error) { return dwConvDo[float64](op, vs) })
}

func dwConvDo[T float](op *dwConvOp, vs []G.Value) (G.Value, error) {
	for i, c := range []struct {
		what  string
		shape tensor.Shape
	}{{"x", tensor.Shape{op.b, op.t, op.d}}, {"w", tensor.Shape{op.k, op.d}}, {"bias", tensor.Shape{op.d}}} {
		if err := checkShape(op, c.what, vs[i], c.shape); err != nil {
			return nil, err
		}
	}
	x, err := floats[T](op, vs[0])
	if err != nil {
		return nil, err
	}
	w, err := floats[T](op, vs[1])
	if err != nil {
		return nil, err
	}
	bias, err := floats[T](op, vs[2])
	if err != nil {
		return nil, err
	}
	out, y := bufFor[T](&op.res, tensor.Shape{op.b, op.t, op.d})
	t, k, d, nbr := op.t, op.k, op.d, op.tab.nbr
	parallelFor(op.b*t, k*d, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			b, i := r/t, r%t
			yr := y[r*d : (r+1)*d]
			copy(yr, bias)
			for o := 0; o < k; o++ {
				j := nbr[i*k+o]
				if j < 0 {
					continue
				}
				xr, wr := x[(b*t+j)*d:(b*t+j+1)*d], w[o*d:(o+1)*d]
				wr, yr := wr[:len(xr)], yr[:len(xr)] // one bounds check per row
				for c, v := range xr {
					yr[c] += wr[c] * v
				}
			}
		}
	})
	return out, nil
}

// dwConvGradOp: w [K, d], dy [B, T, d] -> dx [B, T, d]; with wrtW,
// x [B, T, d], dy [B, T, d] -> dw [K, d].
type dwConvGradOp struct {
	opBase
	dwShape
	tab  *dwTable
	wrtW bool
	res  buf
}

func (op *dwConvGradOp) Arity() int { return 2 }
func (op *dwConvGradOp) Type() hm.Type {
	if op.wrtW {
		return hm.NewFnType(floatT(3), floatT(3), floatT(2))
	}
	return hm.NewFnType(floatT(2), floatT(3), floatT(3))
}
func (op *dwConvGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	if op.wrtW {
		return tensor.Shape{op.k, op.d}, nil
	}
	return tensor.Shape{op.b, op.t, op.d}, nil
}
func (op *dwConvGradOp) String() string {
	which := "X"
	if op.wrtW {
		which = "W"
	}
	return fmt.Sprintf("depthwiseConvGrad%s{B=%d, T=%d, K=%d, d=%d, nbr=%s}", which, op.b, op.t, op.k, op.d, op.tab.fingerprint)
}
func (op *dwConvGradOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *dwConvGradOp) Hashcode() uint32      { return hashOf(op) }
func (op *dwConvGradOp) DiffWRT(int) []bool    { return []bool{true, true} }
func (op *dwConvGradOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, noSecondDerivative(op)
}

func (op *dwConvGradOp) Do(vs ...G.Value) (G.Value, error) {
	return dispatch(op, op, vs,
		func() (G.Value, error) { return dwConvGradDo[float32](op, vs) },
		func() (G.Value, error) { return dwConvGradDo[float64](op, vs) })
}

func dwConvGradDo[T float](op *dwConvGradOp, vs []G.Value) (G.Value, error) {
	first := tensor.Shape{op.k, op.d}
	if op.wrtW {
		first = tensor.Shape{op.b, op.t, op.d}
	}
	if err := checkShape(op, "input", vs[0], first); err != nil {
		return nil, err
	}
	if err := checkShape(op, "dy", vs[1], tensor.Shape{op.b, op.t, op.d}); err != nil {
		return nil, err
	}
	a, err := floats[T](op, vs[0])
	if err != nil {
		return nil, err
	}
	dy, err := floats[T](op, vs[1])
	if err != nil {
		return nil, err
	}
	t, k, d, tab := op.t, op.k, op.d, op.tab
	if !op.wrtW { // dx[b, j] = Σ over (i, o) with nbr[i, o] = j of dy[b, i] ⊙ w[o]
		w := a
		out, dx := bufFor[T](&op.res, tensor.Shape{op.b, t, d})
		parallelFor(op.b*t, k*d, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				b, j := r/t, r%t
				dr := dx[r*d : (r+1)*d]
				clear(dr)
				for n := tab.invStart[j]; n < tab.invStart[j+1]; n++ {
					i, o := tab.invI[n], tab.invO[n]
					gr, wr := dy[(b*t+i)*d:(b*t+i+1)*d], w[o*d:(o+1)*d]
					wr, dr := wr[:len(gr)], dr[:len(gr)]
					for c, g := range gr {
						dr[c] += g * wr[c]
					}
				}
			}
		})
		return out, nil
	}
	// dw[o] = Σ_{b,i} dy[b, i] ⊙ x[b, nbr[i, o]], accumulated in float64,
	// one tap per work item (deterministic at any thread count).
	x := a
	out, dw := bufFor[T](&op.res, tensor.Shape{k, d})
	parallelFor(k, op.b*t*d, func(lo, hi int) {
		acc := make([]float64, d)
		for o := lo; o < hi; o++ {
			clear(acc)
			for b := 0; b < op.b; b++ {
				for i := 0; i < t; i++ {
					j := tab.nbr[i*k+o]
					if j < 0 {
						continue
					}
					gr, xr := dy[(b*t+i)*d:(b*t+i+1)*d], x[(b*t+j)*d:(b*t+j+1)*d]
					xr, acc := xr[:len(gr)], acc[:len(gr)]
					for c, g := range gr {
						acc[c] += float64(g) * float64(xr[c])
					}
				}
			}
			for c, v := range acc {
				dw[o*d+c] = T(v)
			}
		}
	})
	return out, nil
}
