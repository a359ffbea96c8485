package graph

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TableBias looks up a per-head attention bias from a relation table by
// relation ids held in a graph node:
//
//	out[b, h, i, j] = table[ids[b, i, j], h]
//
// table is a float32 or float64 node [R, H] (one learnable scalar per
// relation and head, as T5's, Swin's or Graphormer's bias tables); ids is a
// tensor.Int node [B, Tq, Tk] of relation ids in [0, R); out is
// [B, H, Tq, Tk], the layout of an attention score bias. It is GatherRel's
// lookup with the indices in a node instead of the graph: rebind ids with
// G.Let and one graph serves every batch, as the per-example relations of
// graphs (shortest-path distances) and syntax trees need. Use GatherRel
// when the relations are fixed (they are then part of the graph).
//
// The gradient of table is the scatter-add of the output gradient onto the
// looked-up rows (a repeated id accumulates); ids get no gradient. Shape
// and dtype errors are returned here; an id outside [0, R) makes the
// machine's run fail with an error naming the id, its position and R.
func TableBias(table, ids *G.Node) (*G.Node, error) {
	if err := checkFloatNode("TableBias", "table", table); err != nil {
		return nil, err
	}
	if err := checkIntNode("TableBias", "ids", ids); err != nil {
		return nil, err
	}
	ts, is := table.Shape(), ids.Shape()
	if ts.Dims() != 2 || ts[0] < 1 || ts[1] < 1 {
		return nil, errors.Errorf("graph: TableBias: table must be [R, H], got %v (ids %v)", ts, is)
	}
	if is.Dims() != 3 {
		return nil, errors.Errorf("graph: TableBias: ids must be [B, Tq, Tk], got %v (table %v)", is, ts)
	}
	return G.ApplyOp(&tableBiasOp{r: ts[0], h: ts[1], b: is[0], tq: is[1], tk: is[2]}, table, ids)
}

// tableBiasOp: table [R, H], ids Int [B, Tq, Tk] -> [B, H, Tq, Tk];
// with grad: ids, dy [B, H, Tq, Tk] -> dtable [R, H].
type tableBiasOp struct {
	opBase
	r, h, b, tq, tk int
	grad            bool
	res             buf
}

func (op *tableBiasOp) Arity() int { return 2 }
func (op *tableBiasOp) Type() hm.Type {
	if op.grad {
		return hm.NewFnType(intT(3), floatT(4), floatT(2))
	}
	return hm.NewFnType(floatT(2), intT(3), floatT(4))
}
func (op *tableBiasOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	if op.grad {
		return tensor.Shape{op.r, op.h}, nil
	}
	return tensor.Shape{op.b, op.h, op.tq, op.tk}, nil
}
func (op *tableBiasOp) String() string {
	s := fmt.Sprintf("TableBias{R=%d, H=%d, B=%d, Tq=%d, Tk=%d}", op.r, op.h, op.b, op.tq, op.tk)
	if op.grad {
		return s + "Grad"
	}
	return s
}
func (op *tableBiasOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *tableBiasOp) Hashcode() uint32      { return hashOf(op) }
func (op *tableBiasOp) DiffWRT(int) []bool {
	if op.grad {
		return []bool{false, true}
	}
	return []bool{true, false}
}

func (op *tableBiasOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	if op.grad {
		return nil, noSecondDerivative(op)
	}
	g := &tableBiasOp{r: op.r, h: op.h, b: op.b, tq: op.tq, tk: op.tk, grad: true}
	dt, err := G.ApplyOp(g, in[1], grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dt, nil}, nil
}

func (op *tableBiasOp) Do(vs ...G.Value) (_ G.Value, err error) {
	defer recoverOp(op, &err)
	fv, iv := vs[0], vs[1]
	if op.grad {
		fv, iv = vs[1], vs[0]
	}
	dt, err := checkDtypes(op, fv)
	if err != nil {
		return nil, err
	}
	if dt == tensor.Float32 {
		return tableBiasDo[float32](op, fv, iv)
	}
	return tableBiasDo[float64](op, fv, iv)
}

// tableBiasDo: fv is the table (forward) or dy (grad); iv the ids.
func tableBiasDo[T float](op *tableBiasOp, fv, iv G.Value) (G.Value, error) {
	f, err := floats[T](op, fv)
	if err != nil {
		return nil, err
	}
	ids, err := ints(op, iv)
	if err != nil {
		return nil, err
	}
	r, h, n := op.r, op.h, op.tq*op.tk
	if len(ids) != op.b*n {
		return nil, errors.Errorf("graph: %s: ids have shape %v at run time", op, iv.Shape())
	}
	for i, id := range ids {
		if id < 0 || id >= r {
			return nil, errors.Errorf("graph: TableBias: relation id %d at position %d (example %d, query %d, key %d) is outside the table's %d rows",
				id, i, i/n, i%n/op.tk, i%op.tk, r)
		}
	}
	if !op.grad {
		if len(f) != r*h {
			return nil, errors.Errorf("graph: %s: table has shape %v at run time", op, fv.Shape())
		}
		out, y := bufFor[T](&op.res, tensor.Shape{op.b, h, op.tq, op.tk})
		for b := 0; b < op.b; b++ {
			bi := ids[b*n : (b+1)*n]
			for hh := 0; hh < h; hh++ {
				yo := y[(b*h+hh)*n : (b*h+hh+1)*n]
				for k, id := range bi {
					yo[k] = f[id*h+hh]
				}
			}
		}
		return out, nil
	}
	if len(f) != op.b*h*n {
		return nil, errors.Errorf("graph: %s: dy %v does not match ids %v", op, fv.Shape(), iv.Shape())
	}
	out, dtab := zeroed[T](&op.res, tensor.Shape{r, h})
	for b := 0; b < op.b; b++ {
		bi := ids[b*n : (b+1)*n]
		for hh := 0; hh < h; hh++ {
			dy := f[(b*h+hh)*n : (b*h+hh+1)*n]
			for k, id := range bi {
				dtab[id*h+hh] += dy[k]
			}
		}
	}
	return out, nil
}
