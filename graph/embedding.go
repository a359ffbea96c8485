package graph

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Embedding looks up rows of table: out[s..., :] = table[ids[s...], :].
// table is [V, d] (float32 or float64); ids is a tensor.Int of any shape S of
// rank >= 1; out is S+[d]. The gradient of table is the scatter-add of the
// output gradient onto the looked-up rows (a repeated id accumulates); ids get
// no gradient. Shape and dtype errors are returned here; an id outside [0, V)
// makes the machine's run fail with an error naming the id and V.
func Embedding(table, ids *G.Node) (*G.Node, error) {
	if err := checkFloatNode("Embedding", "table", table); err != nil {
		return nil, err
	}
	if err := checkIntNode("Embedding", "ids", ids); err != nil {
		return nil, err
	}
	ts := table.Shape()
	if len(ts) != 2 {
		return nil, errors.Errorf("graph: Embedding: table must be [V, d], got %v (ids %v)", ts, ids.Shape())
	}
	return G.ApplyOp(&embeddingOp{v: ts[0], d: ts[1], idDims: ids.Dims()}, table, ids)
}

// embeddingOp: table [V, d], ids Int S -> S+[d];
// with grad: ids Int S, dy S+[d] -> dtable [V, d].
type embeddingOp struct {
	opBase
	v, d   int
	idDims int
	grad   bool
	res    buf
}

func (op *embeddingOp) Arity() int { return 2 }
func (op *embeddingOp) Type() hm.Type {
	if op.grad {
		return hm.NewFnType(intT(op.idDims), floatT(op.idDims+1), floatT(2))
	}
	return hm.NewFnType(floatT(2), intT(op.idDims), floatT(op.idDims+1))
}
func (op *embeddingOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if op.grad {
		return tensor.Shape{op.v, op.d}, nil
	}
	s := in[1].(tensor.Shape).Clone()
	return append(s, op.d), nil
}
func (op *embeddingOp) String() string {
	if op.grad {
		return fmt.Sprintf("embeddingGrad{V=%d, d=%d}", op.v, op.d)
	}
	return fmt.Sprintf("Embedding{V=%d, d=%d}", op.v, op.d)
}
func (op *embeddingOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *embeddingOp) Hashcode() uint32      { return hashOf(op) }
func (op *embeddingOp) DiffWRT(int) []bool {
	if op.grad {
		return []bool{false, true}
	}
	return []bool{true, false}
}

func (op *embeddingOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	if op.grad {
		return nil, noSecondDerivative(op)
	}
	g := &embeddingOp{v: op.v, d: op.d, idDims: op.idDims, grad: true}
	dt, err := G.ApplyOp(g, in[1], grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dt, nil}, nil
}

func (op *embeddingOp) Do(vs ...G.Value) (_ G.Value, err error) {
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
		return embeddingDo[float32](op, fv, iv)
	}
	return embeddingDo[float64](op, fv, iv)
}

// embeddingDo: fv is the table (forward) or dy (grad); iv the ids.
func embeddingDo[T float](op *embeddingOp, fv, iv G.Value) (G.Value, error) {
	var name any = op
	f, err := floats[T](name, fv)
	if err != nil {
		return nil, err
	}
	ids, err := ints(name, iv)
	if err != nil {
		return nil, err
	}
	v, d := op.v, op.d
	for i, id := range ids {
		if id < 0 || id >= v {
			return nil, errors.Errorf("graph: Embedding: id %d at position %d is out of range for V = %d", id, i, v)
		}
	}
	if !op.grad {
		if len(f) != v*d {
			return nil, errors.Errorf("graph: %s: table has shape %v at run time", name, fv.Shape())
		}
		out, y := bufFor[T](&op.res, append(iv.Shape().Clone(), d))
		for i, id := range ids {
			copy(y[i*d:(i+1)*d], f[id*d:(id+1)*d])
		}
		return out, nil
	}
	if len(f) != len(ids)*d {
		return nil, errors.Errorf("graph: %s: dy %v does not match ids %v", name, fv.Shape(), iv.Shape())
	}
	out, dt := zeroed[T](&op.res, tensor.Shape{v, d})
	for i, id := range ids {
		row := dt[id*d : (id+1)*d]
		for j, g := range f[i*d : (i+1)*d] {
			row[j] += g
		}
	}
	return out, nil
}
