package graph

import (
	"fmt"
	"hash"
	"hash/fnv"
	"math"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// RotaryPairing says which coordinates of a vector rotate together in
// Rotary.
type RotaryPairing int

const (
	// RotaryHalf pairs x_p with x_{p+rot/2} (HF Llama / GPT-NeoX
	// rotate_half).
	RotaryHalf RotaryPairing = iota
	// RotaryInterleaved pairs x_{2p} with x_{2p+1} (GPT-J
	// rotate_every_two, x-transformers).
	RotaryInterleaved
)

// String returns "half" or "interleaved".
func (p RotaryPairing) String() string {
	switch p {
	case RotaryHalf:
		return "half"
	case RotaryInterleaved:
		return "interleaved"
	}
	return fmt.Sprintf("RotaryPairing(%d)", int(p))
}

// Pair returns the indices (a, b) of the coordinates that pair p of a
// rotation over rot dims rotates together.
func (p RotaryPairing) Pair(i, rot int) (a, b int) {
	if p == RotaryInterleaved {
		return 2 * i, 2*i + 1
	}
	return i, i + rot/2
}

// RotaryTable holds the cosines and sines of a rotary position embedding
// (Su et al. 2021, "RoFormer") for T positions and Half = rot/2 rotation
// pairs, row-major [T, Half]:
//
//	Cos[t*Half+p] = c_t,p    Sin[t*Half+p] = s_t,p
//
// usually c = a cos(pos_t θ_p), s = a sin(pos_t θ_p) with an attention factor
// a (1 except for YaRN). A table is immutable once made: Rotary ops keep a
// reference to it and are identified by a hash of its contents, computed
// once by NewRotaryTable, so a table can be cached and reused by many ops.
type RotaryTable struct {
	T, Half  int
	Cos, Sin []float64
	id       uint64
}

// NewRotaryTable returns the table of t positions and half pairs with the
// given cos and sin, each of length t*half (copied). It returns an error if
// a size is not positive, a length does not match or a value is not finite.
func NewRotaryTable(t, half int, cos, sin []float64) (*RotaryTable, error) {
	if t <= 0 || half <= 0 {
		return nil, errors.Errorf("graph: NewRotaryTable: t = %d and half = %d must be positive", t, half)
	}
	if len(cos) != t*half || len(sin) != t*half {
		return nil, errors.Errorf("graph: NewRotaryTable: cos has %d and sin %d values, want t*half = %d*%d = %d", len(cos), len(sin), t, half, t*half)
	}
	h := fnv.New64a()
	var b [8]byte
	put := func(u uint64) {
		for i := range b {
			b[i] = byte(u >> (8 * i))
		}
		h.Write(b[:])
	}
	put(uint64(t))
	put(uint64(half))
	for _, s := range [][]float64{cos, sin} {
		for k, v := range s {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, errors.Errorf("graph: NewRotaryTable: value %d is %v", k, v)
			}
			put(math.Float64bits(v))
		}
	}
	return &RotaryTable{T: t, Half: half, Cos: append([]float64(nil), cos...), Sin: append([]float64(nil), sin...), id: h.Sum64()}, nil
}

// ID is the 64-bit FNV-1a hash of the table's sizes and values that
// identifies the table in the String (and so the hash) of Rotary ops.
func (tab *RotaryTable) ID() uint64 { return tab.id }

// Rotary rotates the leading 2*tab.Half coordinates of every vector x[..., t, :]
// pair by pair with the cos and sin of row t of tab:
//
//	y_a = x_a c_t,p - x_b s_t,p
//	y_b = x_b c_t,p + x_a s_t,p        (a, b) = pairing.Pair(p, 2*tab.Half)
//
// and copies the remaining coordinates. x is a float32 or float64 node
// [..., T, D] of rank >= 2 with T = tab.T and D >= 2*tab.Half; y has x's
// shape. This is RoPE applied to q or k [B, H, T, dh] (Su et al. 2021).
//
// The op is linear in x; its gradient is the transposed map, Rotary with the
// sines negated (the inverse rotation when c² + s² = 1). The table is an
// attribute, not an input: no gradient flows to it. Shape and dtype errors
// are returned here. Two Rotary nodes of the same input are merged by
// Gorgonia only if their tables have equal contents.
func Rotary(x *G.Node, tab *RotaryTable, pairing RotaryPairing) (*G.Node, error) {
	return rotary(x, tab, pairing, false)
}

func rotary(x *G.Node, tab *RotaryTable, pairing RotaryPairing, transpose bool) (*G.Node, error) {
	if err := checkFloatNode("Rotary", "x", x); err != nil {
		return nil, err
	}
	if tab == nil {
		return nil, errors.Errorf("graph: Rotary: nil table (x %v)", x.Shape())
	}
	if pairing != RotaryHalf && pairing != RotaryInterleaved {
		return nil, errors.Errorf("graph: Rotary: unknown pairing %v (x %v)", pairing, x.Shape())
	}
	s := x.Shape()
	if len(s) < 2 || s[len(s)-2] != tab.T || s[len(s)-1] < 2*tab.Half {
		return nil, errors.Errorf("graph: Rotary: x %v must be [..., T, D] with T = %d and D >= %d (the table's rotary dims)", s, tab.T, 2*tab.Half)
	}
	op := &rotaryOp{tab: tab, pairing: pairing, transpose: transpose, dims: len(s)}
	return G.ApplyOp(op, x)
}

// rotaryOp is Rotary, or with transpose set its adjoint (sines negated).
type rotaryOp struct {
	opBase
	tab       *RotaryTable
	pairing   RotaryPairing
	transpose bool
	dims      int
	res       buf
	cos, sin  any // []float32 or []float64 tables, see rotaryTables
}

func (op *rotaryOp) Arity() int { return 1 }
func (op *rotaryOp) Type() hm.Type {
	t := floatT(op.dims)
	return hm.NewFnType(t, t)
}
func (op *rotaryOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, errors.Errorf("graph: %v: expected 1 input, got %d", op, len(in))
	}
	s, ok := in[0].(tensor.Shape)
	if !ok {
		return nil, errors.Errorf("graph: %v: cannot infer the shape from %T", op, in[0])
	}
	if err := op.checkShape(s); err != nil {
		return nil, err
	}
	return s.Clone(), nil
}
func (op *rotaryOp) checkShape(s tensor.Shape) error {
	if len(s) != op.dims || s[len(s)-2] != op.tab.T || s[len(s)-1] < 2*op.tab.Half {
		return errors.Errorf("graph: %v: input has shape %v", op, s)
	}
	return nil
}
func (op *rotaryOp) String() string {
	name := "Rotary"
	if op.transpose {
		name = "RotaryT"
	}
	return fmt.Sprintf("%s{T=%d, half=%d, pairing=%v, rank=%d, table=%016x}", name, op.tab.T, op.tab.Half, op.pairing, op.dims, op.tab.id)
}
func (op *rotaryOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *rotaryOp) Hashcode() uint32      { return hashOf(op) }
func (op *rotaryOp) DiffWRT(int) []bool    { return []bool{true} }

// SymDiff: y = R x with R block-diagonal, so dx = Rᵀ dy: the same rotation
// with the sines negated.
func (op *rotaryOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	d, err := rotary(grad, op.tab, op.pairing, !op.transpose)
	if err != nil {
		return nil, err
	}
	return G.Nodes{d}, nil
}

func (op *rotaryOp) Do(vs ...G.Value) (G.Value, error) {
	if len(vs) != 1 {
		return nil, errors.Errorf("graph: %v: expected 1 input, got %d", op, len(vs))
	}
	return dispatch(op, op, vs,
		func() (G.Value, error) { return rotaryDo[float32](op, vs[0]) },
		func() (G.Value, error) { return rotaryDo[float64](op, vs[0]) })
}

func rotaryDo[T float](op *rotaryOp, v G.Value) (G.Value, error) {
	var name any = op
	s := v.Shape()
	if err := op.checkShape(s); err != nil {
		return nil, err
	}
	x, err := floats[T](name, v)
	if err != nil {
		return nil, err
	}
	out, y := bufFor[T](&op.res, s)
	tt, half, d := op.tab.T, op.tab.Half, s[len(s)-1]
	cs, sn := rotaryTables[T](op)
	rows := len(x) / d
	parallelFor(rows, 2*d, func(lo, hi int) {
		if op.pairing != RotaryInterleaved {
			if x32, ok := any(x).([]float32); ok { // the vectorised kernel
				k32.rotaryHalf(any(y).([]float32), x32, d, half, tt, lo, hi, any(cs).([]float32), any(sn).([]float32))
				return
			}
			rotaryHalfGo(y, x, d, half, tt, lo, hi, cs, sn)
			return
		}
		for r := lo; r < hi; r++ {
			t := r % tt
			xr, yr := x[r*d:(r+1)*d], y[r*d:(r+1)*d]
			copy(yr[2*half:], xr[2*half:]) // dims beyond the rotary ones
			c, si := cs[t*half:(t+1)*half], sn[t*half:(t+1)*half]
			for p := range c {
				xa, xb := xr[2*p], xr[2*p+1]
				yr[2*p] = xa*c[p] - xb*si[p]
				yr[2*p+1] = xb*c[p] + xa*si[p]
			}
		}
	})
	return out, nil
}

// rotaryTables returns the op's cos and sin tables in T (sin negated for
// the transposed rotation), converted once and kept in the op.
func rotaryTables[T float](op *rotaryOp) (cs, sn []T) {
	if c, ok := op.cos.([]T); ok {
		return c, op.sin.([]T)
	}
	sign := 1.0
	if op.transpose {
		sign = -1
	}
	cs, sn = make([]T, len(op.tab.Cos)), make([]T, len(op.tab.Sin))
	for i, v := range op.tab.Cos {
		cs[i] = T(v)
	}
	for i, v := range op.tab.Sin {
		sn[i] = T(sign * v)
	}
	op.cos, op.sin = cs, sn
	return cs, sn
}
