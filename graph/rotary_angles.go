package graph

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// RotaryAngles rotates the leading 2*Half coordinates of every vector
// x[..., t, :] pair by pair by angles taken from a node, not from a host
// table as Rotary does:
//
//	y_a = x_a cos φ - x_b sin φ
//	y_b = x_b cos φ + x_a sin φ        (a, b) = pairing.Pair(p, 2*Half)
//
// with φ = angles[..., t, p], and copies the remaining coordinates. x is a
// float32 or float64 node [..., T, D] of rank >= 2; angles is a node of the
// same dtype [..., T, Half] with 2 <= rank(angles) <= rank(x), 2*Half <= D,
// whose leading axes equal the trailing leading axes of x and broadcast
// over the rest: with x [B, H, T, D], angles [T, Half] rotates every
// example and head alike, angles [H, T, Half] per head (RoPE-Mixed, Heo et
// al. 2024), angles [B, H, T, Half] per example and head. y has x's shape.
//
// Gradients flow to both inputs: dx is the inverse rotation of the output
// gradient g (RotaryAngles with the angles negated, differentiable again),
// and
//
//	dφ = Σ (g_b y_a - g_a y_b)
//
// summed over the broadcast axes of x, computed by a gradient op
// (rotaryAnglesGrad) that has no derivative itself. Shape and dtype errors
// are returned here, naming the op and both shapes. Angles are converted to
// float64 for sin and cos in both dtypes.
func RotaryAngles(x, angles *G.Node, pairing RotaryPairing) (*G.Node, error) {
	return rotaryAngles(x, angles, pairing, false)
}

func rotaryAngles(x, angles *G.Node, pairing RotaryPairing, inverse bool) (*G.Node, error) {
	if err := checkFloatNode("RotaryAngles", "x", x); err != nil {
		return nil, err
	}
	if err := checkFloatNode("RotaryAngles", "angles", angles); err != nil {
		return nil, err
	}
	if x.Dtype() != angles.Dtype() {
		return nil, errors.Errorf("graph: RotaryAngles: x %v is %v, angles %v is %v", x.Shape(), x.Dtype(), angles.Shape(), angles.Dtype())
	}
	if pairing != RotaryHalf && pairing != RotaryInterleaved {
		return nil, errors.Errorf("graph: RotaryAngles: unknown pairing %v (x %v)", pairing, x.Shape())
	}
	if err := checkRotaryAnglesShapes(x.Shape(), angles.Shape()); err != nil {
		return nil, err
	}
	op := &rotaryAnglesOp{rotaryAnglesAttrs: rotaryAnglesAttrs{pairing: pairing, inverse: inverse, dims: x.Dims(), adims: angles.Dims()}}
	return G.ApplyOp(op, x, angles)
}

// checkRotaryAnglesShapes returns an error naming RotaryAngles unless
// angles [..., T, Half] fits x [..., T, D] (see RotaryAngles).
func checkRotaryAnglesShapes(xs, as tensor.Shape) error {
	bad := func(why string) error {
		return errors.Errorf("graph: RotaryAngles: x %v and angles %v: %s", xs, as, why)
	}
	if len(xs) < 2 {
		return bad("x must be [..., T, D] of rank >= 2")
	}
	if len(as) < 2 || len(as) > len(xs) {
		return bad("angles must be [..., T, Half] of rank 2 to rank(x)")
	}
	off := len(xs) - len(as)
	for i := 0; i < len(as)-1; i++ {
		if as[i] != xs[off+i] {
			return bad(fmt.Sprintf("axis %d of angles (%d) must equal axis %d of x (%d)", i, as[i], off+i, xs[off+i]))
		}
	}
	if h := as[len(as)-1]; h < 1 || 2*h > xs[len(xs)-1] {
		return bad(fmt.Sprintf("%d pairs need 2*Half <= D = %d", h, xs[len(xs)-1]))
	}
	return nil
}

// rotaryAnglesOp is RotaryAngles, or with inverse set the rotation by the
// negated angles (its adjoint in x).
type rotaryAnglesOp struct {
	opBase
	rotaryAnglesAttrs
	res buf
}

// rotaryAnglesAttrs are the attributes of RotaryAngles and of its angle
// gradient: the pairing, whether the rotation is by the negated angles,
// and the ranks of x and of the angles.
type rotaryAnglesAttrs struct {
	pairing     RotaryPairing
	inverse     bool
	dims, adims int
}

// check returns an error naming op unless x and angles have the op's
// ranks and fit each other.
func (a rotaryAnglesAttrs) check(op fmt.Stringer, xs, as tensor.Shape) error {
	if len(xs) != a.dims || len(as) != a.adims {
		return errors.Errorf("graph: %v: inputs have shapes %v and %v", op, xs, as)
	}
	return checkRotaryAnglesShapes(xs, as)
}

func (op *rotaryAnglesOp) Arity() int { return 2 }
func (op *rotaryAnglesOp) Type() hm.Type {
	return hm.NewFnType(floatT(op.dims), floatT(op.adims), floatT(op.dims))
}
func (op *rotaryAnglesOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	xs, as, err := twoShapes(op, in)
	if err != nil {
		return nil, err
	}
	if err := op.check(op, xs, as); err != nil {
		return nil, err
	}
	return xs.Clone(), nil
}
func (op *rotaryAnglesOp) String() string {
	name := "RotaryAngles"
	if op.inverse {
		name = "RotaryAnglesInv"
	}
	return fmt.Sprintf("%s{pairing=%v, rank=%d, anglesRank=%d}", name, op.pairing, op.dims, op.adims)
}
func (op *rotaryAnglesOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *rotaryAnglesOp) Hashcode() uint32      { return hashOf(op) }
func (op *rotaryAnglesOp) DiffWRT(int) []bool    { return []bool{true, true} }

// SymDiff: y = R(±φ) x, so dx = R(∓φ) g, and dφ from rotaryAnglesGrad
// (sign -1 for the inverse rotation).
func (op *rotaryAnglesOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	dx, err := rotaryAngles(grad, in[1], op.pairing, !op.inverse)
	if err != nil {
		return nil, err
	}
	gop := &rotaryAnglesGradOp{rotaryAnglesAttrs: op.rotaryAnglesAttrs}
	da, err := G.ApplyOp(gop, in[0], in[1], grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx, da}, nil
}

func (op *rotaryAnglesOp) Do(vs ...G.Value) (G.Value, error) {
	if len(vs) != 2 {
		return nil, errors.Errorf("graph: %v: expected 2 inputs, got %d", op, len(vs))
	}
	return dispatch(op, op, vs,
		func() (G.Value, error) { return rotaryAnglesDo[float32](op, vs[0], vs[1]) },
		func() (G.Value, error) { return rotaryAnglesDo[float64](op, vs[0], vs[1]) })
}

// twoShapes returns the first two input shapes of InferShape.
func twoShapes(op fmt.Stringer, in []G.DimSizer) (a, b tensor.Shape, err error) {
	if len(in) < 2 {
		return nil, nil, errors.Errorf("graph: %v: expected at least 2 inputs, got %d", op, len(in))
	}
	a, ok1 := in[0].(tensor.Shape)
	b, ok2 := in[1].(tensor.Shape)
	if !ok1 || !ok2 {
		return nil, nil, errors.Errorf("graph: %v: cannot infer the shape from %T and %T", op, in[0], in[1])
	}
	return a, b, nil
}

// sinCos returns cos and sin of every angle (negated sines when inverse),
// computed in float64.
func sinCos[T float](ang []T, inverse bool) (cs, sn []T) {
	cs, sn = make([]T, len(ang)), make([]T, len(ang))
	for i, a := range ang {
		s, c := math.Sincos(float64(a))
		if inverse {
			s = -s
		}
		cs[i], sn[i] = T(c), T(s)
	}
	return cs, sn
}

// rotateRow writes the rotation of xr by (c, s) pair by pair into yr and
// copies the dims beyond the 2*len(c) rotary ones.
func rotateRow[T float](xr, yr, c, s []T, pairing RotaryPairing) {
	half := len(c)
	copy(yr[2*half:], xr[2*half:])
	if pairing == RotaryInterleaved {
		for p := range c {
			xa, xb := xr[2*p], xr[2*p+1]
			yr[2*p] = xa*c[p] - xb*s[p]
			yr[2*p+1] = xb*c[p] + xa*s[p]
		}
		return
	}
	for p := range c {
		xa, xb := xr[p], xr[p+half]
		yr[p] = xa*c[p] - xb*s[p]
		yr[p+half] = xb*c[p] + xa*s[p]
	}
}

func rotaryAnglesDo[T float](op *rotaryAnglesOp, xv, av G.Value) (G.Value, error) {
	var name any = op
	xs, as := xv.Shape(), av.Shape()
	if err := op.check(op, xs, as); err != nil {
		return nil, err
	}
	x, err := floats[T](name, xv)
	if err != nil {
		return nil, err
	}
	ang, err := floats[T](name, av)
	if err != nil {
		return nil, err
	}
	out, y := bufFor[T](&op.res, xs)
	d, half := xs[len(xs)-1], as[len(as)-1]
	arows := len(ang) / half // rows of angles; row r of x uses row r % arows
	cs, sn := sinCos(ang, op.inverse)
	rows := len(x) / d
	parallelFor(rows, 2*d, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			ar := r % arows
			rotateRow(x[r*d:(r+1)*d], y[r*d:(r+1)*d], cs[ar*half:(ar+1)*half], sn[ar*half:(ar+1)*half], op.pairing)
		}
	})
	return out, nil
}

// rotaryAnglesGradOp computes the gradient of a RotaryAngles (or, with
// inverse, of its inverse rotation) w.r.t. the angles from x, the angles
// and the output gradient g: dφ = ±Σ (g_b y_a - g_a y_b), summed over the
// axes of x that the angles broadcast over. A gradient op: no derivative.
type rotaryAnglesGradOp struct {
	opBase
	rotaryAnglesAttrs
	res buf
}

func (op *rotaryAnglesGradOp) Arity() int { return 3 }
func (op *rotaryAnglesGradOp) Type() hm.Type {
	return hm.NewFnType(floatT(op.dims), floatT(op.adims), floatT(op.dims), floatT(op.adims))
}
func (op *rotaryAnglesGradOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	xs, as, err := twoShapes(op, in)
	if err != nil {
		return nil, err
	}
	if err := checkRotaryAnglesShapes(xs, as); err != nil {
		return nil, err
	}
	return as.Clone(), nil
}
func (op *rotaryAnglesGradOp) String() string {
	return fmt.Sprintf("rotaryAnglesGrad{pairing=%v, inverse=%v, rank=%d, anglesRank=%d}", op.pairing, op.inverse, op.dims, op.adims)
}
func (op *rotaryAnglesGradOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *rotaryAnglesGradOp) Hashcode() uint32      { return hashOf(op) }
func (op *rotaryAnglesGradOp) DiffWRT(int) []bool    { return []bool{false, false, false} }
func (op *rotaryAnglesGradOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, noSecondDerivative(op)
}

func (op *rotaryAnglesGradOp) Do(vs ...G.Value) (G.Value, error) {
	if len(vs) != 3 {
		return nil, errors.Errorf("graph: %v: expected 3 inputs, got %d", op, len(vs))
	}
	return dispatch(op, op, vs,
		func() (G.Value, error) { return rotaryAnglesGradDo[float32](op, vs) },
		func() (G.Value, error) { return rotaryAnglesGradDo[float64](op, vs) })
}

func rotaryAnglesGradDo[T float](op *rotaryAnglesGradOp, vs []G.Value) (G.Value, error) {
	var name any = op
	xs, as := vs[0].Shape(), vs[1].Shape()
	if err := op.check(op, xs, as); err != nil {
		return nil, err
	}
	if err := checkShape(name, "gradient", vs[2], xs); err != nil {
		return nil, err
	}
	x, err := floats[T](name, vs[0])
	if err != nil {
		return nil, err
	}
	ang, err := floats[T](name, vs[1])
	if err != nil {
		return nil, err
	}
	g, err := floats[T](name, vs[2])
	if err != nil {
		return nil, err
	}
	out, da := bufFor[T](&op.res, as)
	d, half := xs[len(xs)-1], as[len(as)-1]
	arows := len(ang) / half
	reps := len(x) / d / arows
	cs, sn := sinCos(ang, op.inverse)
	var sign T = 1
	if op.inverse {
		sign = -1
	}
	inter := op.pairing == RotaryInterleaved
	// Each angle row sums over its reps rows of x in a fixed order, so the
	// result does not depend on the number of threads.
	parallelFor(arows, 6*reps*half, func(lo, hi int) {
		for ar := lo; ar < hi; ar++ {
			c, s := cs[ar*half:(ar+1)*half], sn[ar*half:(ar+1)*half]
			dr := da[ar*half : (ar+1)*half]
			clear(dr)
			for rep := 0; rep < reps; rep++ {
				r := rep*arows + ar
				xr, gr := x[r*d:(r+1)*d], g[r*d:(r+1)*d]
				for p := range dr {
					a, b := p, p+half
					if inter {
						a, b = 2*p, 2*p+1
					}
					ya := xr[a]*c[p] - xr[b]*s[p]
					yb := xr[b]*c[p] + xr[a]*s[p]
					dr[p] += gr[b]*ya - gr[a]*yb
				}
			}
			if sign < 0 {
				for p := range dr {
					dr[p] = -dr[p]
				}
			}
		}
	})
	return out, nil
}
