package graph

import (
	"fmt"
	"hash"
	"math/rand"
	"regexp"
	"strings"
	"testing"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// squareOp is x -> x² with a configurable derivative factor: 2 is right, any
// other factor is a deliberately wrong gradient that GradCheck must catch.
type squareOp struct {
	opBase
	dims   int
	factor float64
}

func (op *squareOp) Arity() int    { return 1 }
func (op *squareOp) Type() hm.Type { return hm.NewFnType(floatT(op.dims), floatT(op.dims)) }
func (op *squareOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return in[0].(tensor.Shape).Clone(), nil
}
func (op *squareOp) String() string        { return fmt.Sprintf("square{%g}", op.factor) }
func (op *squareOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *squareOp) Hashcode() uint32      { return hashOf(op) }
func (op *squareOp) DiffWRT(int) []bool    { return []bool{true} }
func (op *squareOp) Do(vs ...G.Value) (G.Value, error) {
	x, err := floats[float64]("square", vs[0])
	if err != nil {
		return nil, err
	}
	out, y := newDense[float64](vs[0].Shape())
	for i, v := range x {
		y[i] = v * v
	}
	return out, nil
}

// SymDiff returns factor * x * dy.
func (op *squareOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	g := in[0].Graph()
	f := G.NewScalar(g, tensor.Float64, G.WithName(fmt.Sprintf("factor%g", op.factor)), G.WithValue(op.factor))
	fx, err := BroadcastMul(in[0], f)
	if err != nil {
		return nil, err
	}
	dx, err := BroadcastMul(grad, fx)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx}, nil
}

func squareGraph(t *testing.T, factor float64) (*G.ExprGraph, *G.Node, *G.Node) {
	rng := rand.New(rand.NewSource(3))
	g := G.NewGraph()
	x := input(g, "x", randDense(rng, tensor.Float64, 1, 3, 4))
	y := must(t)(G.ApplyOp(&squareOp{dims: 2, factor: factor}, x))
	return g, x, projLoss(t, rng, y, "w")
}

func TestGradCheckCatchesWrongGradient(t *testing.T) {
	g, x, loss := squareGraph(t, 2)
	if err := GradCheck(g, loss, G.Nodes{x}, GradCheckOpts{}); err != nil {
		t.Fatalf("right gradient rejected: %v", err)
	}
	for _, factor := range []float64{1.9, 2.001, -2, 0} {
		g, x, loss := squareGraph(t, factor)
		before := ToFloat64s(x.Value().(*tensor.Dense))
		err := GradCheck(g, loss, G.Nodes{x}, GradCheckOpts{})
		if err == nil {
			t.Fatalf("factor %g: wrong gradient accepted", factor)
		}
		msg := err.Error()
		for _, want := range []string{"x(3, 4) element", "analytic", "numeric", "of 12 checked"} {
			if !strings.Contains(msg, want) {
				t.Errorf("factor %g: error %q lacks %q", factor, msg, want)
			}
		}
		if n := strings.Count(msg, "analytic"); n != maxReported {
			t.Errorf("factor %g: %d failures detailed, want %d", factor, n, maxReported)
		}
		checkClose(t, "x after GradCheck", ToFloat64s(x.Value().(*tensor.Dense)), before, 0, 0)
	}
}

// TestGradCheckReportsValues checks the numbers in the error: with factor 1
// the analytic gradient is half the numeric one.
func TestGradCheckReportsValues(t *testing.T) {
	g, x, loss := squareGraph(t, 1)
	err := GradCheck(g, loss, G.Nodes{x}, GradCheckOpts{MaxPerNode: 3, Seed: 7})
	if err == nil {
		t.Fatal("wrong gradient accepted")
	}
	if !strings.Contains(err.Error(), "3 of 3 checked") {
		t.Errorf("MaxPerNode 3: %v", err)
	}
	re := regexp.MustCompile(`analytic (\S+), numeric (\S+)`)
	ms := re.FindAllStringSubmatch(err.Error(), -1)
	if len(ms) != 3 {
		t.Fatalf("error %v: %d values", err, len(ms))
	}
	for _, m := range ms {
		var a, n float64
		fmt.Sscan(m[1], &a)
		fmt.Sscan(m[2], &n)
		checkClose(t, "numeric vs 2*analytic", []float64{n}, []float64{2 * a}, 1e-6, 1e-6)
	}
}

// TestGradCheckAfterAccumulation runs a machine with dual values several
// times first, so Gorgonia has accumulated 3x the gradient in the dual
// values; GradCheck must still compare the gradient of one run, and twice in a
// row.
func TestGradCheckAfterAccumulation(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	g := G.NewGraph()
	x := input(g, "x", randDense(rng, tensor.Float64, 1, 2, 3))
	gm := input(g, "gamma", randDense(rng, tensor.Float64, 1, 3))
	bt := input(g, "beta", randDense(rng, tensor.Float64, 1, 3))
	loss := projLoss(t, rng, must(t)(LayerNorm(x, gm, bt, 1e-5)), "w")
	if _, err := G.Grad(loss, x, gm, bt); err != nil {
		t.Fatal(err)
	}
	m := G.NewTapeMachine(g, G.BindDualValues(x, gm, bt))
	var once []float64
	for i := 0; i < 3; i++ {
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		m.Reset()
		gv, _ := bt.Grad()
		if i == 0 {
			once = valueFloat64s(gv)
		}
	}
	gv, _ := bt.Grad()
	thrice := valueFloat64s(gv)
	for i := range once {
		once[i] *= 3
	}
	checkClose(t, "accumulated gradient (Gorgonia behaviour)", thrice, once, 1e-12, 1e-12)
	m.Close()
	for i := 0; i < 2; i++ {
		if err := GradCheck(g, loss, G.Nodes{x, gm, bt}, GradCheckOpts{}); err != nil {
			t.Fatalf("GradCheck %d: %v", i, err)
		}
	}
}

// TestGradCheckScalarWRT checks a scalar input node.
func TestGradCheckScalarWRT(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	g := G.NewGraph()
	x := input(g, "x", randDense(rng, tensor.Float64, 1, 2, 3))
	s := G.NewScalar(g, tensor.Float64, G.WithName("s"), G.WithValue(0.7))
	loss := projLoss(t, rng, must(t)(GELU(must(t)(BroadcastMul(x, s)))), "w")
	gradCheck(t, g, loss, x, s)
	if v := s.Value().Data().(float64); v != 0.7 {
		t.Fatalf("s = %v after GradCheck, want 0.7", v)
	}
}

func TestGradCheckErrors(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	g := G.NewGraph()
	x := input(g, "x", randDense(rng, tensor.Float64, 1, 2, 3))
	y := must(t)(GELU(x))
	loss := projLoss(t, rng, y, "w")
	unbound := G.NewTensor(g, tensor.Float64, 1, G.WithShape(3), G.WithName("unbound"))
	unused := input(g, "unused", randDense(rng, tensor.Float64, 1, 2))

	g32 := G.NewGraph()
	x32 := input(g32, "x32", randDense(rng, tensor.Float32, 1, 2, 3))
	loss32 := must(t)(G.Sum(x32))

	other := G.NewGraph()
	xo := input(other, "xo", randDense(rng, tensor.Float64, 1, 2))

	for _, c := range []struct {
		name string
		g    *G.ExprGraph
		loss *G.Node
		wrt  G.Nodes
		want string
	}{
		{"non-scalar loss", g, y, G.Nodes{x}, "scalar"},
		{"float32", g32, loss32, G.Nodes{x32}, "float64"},
		{"not input", g, loss, G.Nodes{y}, "not an input"},
		{"unbound", g, loss, G.Nodes{unbound}, "no value"},
		{"other graph", g, loss, G.Nodes{xo}, "not in the graph"},
		{"empty", g, loss, nil, "no nodes"},
		{"unused", g, loss, G.Nodes{unused}, "G.Grad"},
	} {
		err := GradCheck(c.g, c.loss, c.wrt, GradCheckOpts{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}
