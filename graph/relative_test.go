package graph

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// relCase is a GatherRel/ScatterRel input: leading dims, Tq, Tk, R.
type relCase struct {
	lead      []int
	tq, tk, r int
}

func (c relCase) String() string { return fmt.Sprintf("%v_%dx%dx%d", c.lead, c.tq, c.tk, c.r) }

// relCases cover rank 2, 3 and 4, Tq != Tk, R smaller than Tk (indices
// repeat within a row) and larger (some columns never used).
var relCases = []relCase{
	{nil, 3, 3, 5},
	{[]int{2}, 2, 4, 3},
	{[]int{2, 3}, 3, 2, 7},
	{[]int{1, 2}, 4, 5, 9},
}

// randIdx returns tq*tk indices in [0, r) from rng.
func randIdx(rng *rand.Rand, tq, tk, r int) []int {
	idx := make([]int, tq*tk)
	for k := range idx {
		idx[k] = rng.Intn(r)
	}
	return idx
}

func shapeOf(lead []int, a, b int) []int {
	return append(append([]int(nil), lead...), a, b)
}

// refGatherRel and refScatterRel are the definitions, written as loops over
// the multi-index.
func refGatherRel(m []float64, lead []int, idx []int, tq, tk, r int) []float64 {
	mats := tensor.Shape(lead).TotalSize()
	if len(lead) == 0 {
		mats = 1
	}
	out := make([]float64, mats*tq*tk)
	for b := 0; b < mats; b++ {
		for i := 0; i < tq; i++ {
			for j := 0; j < tk; j++ {
				out[(b*tq+i)*tk+j] = m[(b*tq+i)*r+idx[i*tk+j]]
			}
		}
	}
	return out
}

func refScatterRel(p []float64, lead []int, idx []int, tq, tk, r int) []float64 {
	mats := tensor.Shape(lead).TotalSize()
	if len(lead) == 0 {
		mats = 1
	}
	out := make([]float64, mats*tq*r)
	for b := 0; b < mats; b++ {
		for i := 0; i < tq; i++ {
			for c := 0; c < r; c++ {
				for j := 0; j < tk; j++ {
					if idx[i*tk+j] == c {
						out[(b*tq+i)*r+c] += p[(b*tq+i)*tk+j]
					}
				}
			}
		}
	}
	return out
}

func TestRelValues(t *testing.T) {
	for ci, c := range relCases {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			t.Run(fmt.Sprintf("%v_%v", c, dt), func(t *testing.T) {
				rng := rand.New(rand.NewSource(int64(ci)))
				idx := randIdx(rng, c.tq, c.tk, c.r)
				g := G.NewGraph()
				mv := randDense(rng, dt, 1, shapeOf(c.lead, c.tq, c.r)...)
				pv := randDense(rng, dt, 1, shapeOf(c.lead, c.tq, c.tk)...)
				gather := must(t)(GatherRel(input(g, "m", mv), idx, c.tq, c.tk))
				scatter := must(t)(ScatterRel(input(g, "p", pv), idx, c.tq, c.tk, c.r))
				if want := tensor.Shape(shapeOf(c.lead, c.tq, c.tk)); !gather.Shape().Eq(want) {
					t.Fatalf("GatherRel shape %v, want %v", gather.Shape(), want)
				}
				if want := tensor.Shape(shapeOf(c.lead, c.tq, c.r)); !scatter.Shape().Eq(want) {
					t.Fatalf("ScatterRel shape %v, want %v", scatter.Shape(), want)
				}
				run(t, g)
				for _, n := range []*G.Node{gather, scatter} {
					if n.Value().Dtype() != dt || !n.Value().Shape().Eq(n.Shape()) {
						t.Fatalf("%v: value %v %v, want %v %v", n.Op(), n.Value().Dtype(), n.Value().Shape(), dt, n.Shape())
					}
				}
				tol := 1e-15
				if dt == tensor.Float32 {
					tol = 1e-6
				}
				checkClose(t, "GatherRel", valueFloat64s(gather.Value()), refGatherRel(ToFloat64s(mv), c.lead, idx, c.tq, c.tk, c.r), 0, 0)
				checkClose(t, "ScatterRel", valueFloat64s(scatter.Value()), refScatterRel(ToFloat64s(pv), c.lead, idx, c.tq, c.tk, c.r), tol, tol)
			})
		}
	}
}

// TestRelHandValues checks a case written out by hand: a Shaw-style clipped
// index (K = 1) for Tq = 2, Tk = 3, so row 0 maps keys to 1, 2, 2 and row 1 to
// 0, 1, 2.
func TestRelHandValues(t *testing.T) {
	idx := []int{1, 2, 2, 0, 1, 2}
	g := G.NewGraph()
	m := input(g, "m", fromFloat64(tensor.Float64, tensor.Shape{2, 3}, []float64{10, 11, 12, 20, 21, 22}))
	p := input(g, "p", fromFloat64(tensor.Float64, tensor.Shape{2, 3}, []float64{1, 2, 4, 8, 16, 32}))
	gather := must(t)(GatherRel(m, idx, 2, 3))
	scatter := must(t)(ScatterRel(p, idx, 2, 3, 3))
	run(t, g)
	checkClose(t, "GatherRel", valueFloat64s(gather.Value()), []float64{11, 12, 12, 20, 21, 22}, 0, 0)
	checkClose(t, "ScatterRel", valueFloat64s(scatter.Value()), []float64{0, 1, 6, 8, 16, 32}, 0, 0)
}

func TestRelGrad(t *testing.T) {
	for ci, c := range relCases {
		t.Run(c.String(), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(10 + ci)))
			idx := randIdx(rng, c.tq, c.tk, c.r)
			g := G.NewGraph()
			m := input(g, "m", randDense(rng, tensor.Float64, 1, shapeOf(c.lead, c.tq, c.r)...))
			p := input(g, "p", randDense(rng, tensor.Float64, 1, shapeOf(c.lead, c.tq, c.tk)...))
			gather := must(t)(GatherRel(m, idx, c.tq, c.tk))
			scatter := must(t)(ScatterRel(p, idx, c.tq, c.tk, c.r))
			loss := must(t)(G.Add(projLoss(t, rng, gather, "wg"), projLoss(t, rng, scatter, "ws")))
			gradCheck(t, g, loss, m, p)
		})
	}
}

// TestRelShawKeyGrad uses GatherRel as Shaw's key term does: M = q·Tableᵀ
// with a matmul, then gather; the gradients of q and of the table are
// checked through both ops, and the value against a direct loop.
func TestRelShawKeyGrad(t *testing.T) {
	const bh, tq, tk, d, k = 2, 3, 4, 2, 1
	r := 2*k + 1
	idx := make([]int, tq*tk)
	for i := 0; i < tq; i++ {
		for j := 0; j < tk; j++ {
			idx[i*tk+j] = min(max(j-i, -k), k) + k
		}
	}
	rng := rand.New(rand.NewSource(3))
	g := G.NewGraph()
	qv := randDense(rng, tensor.Float64, 1, bh, tq, d)
	tv := randDense(rng, tensor.Float64, 1, r, d)
	q := input(g, "q", qv)
	tab := input(g, "table", tv)
	q2 := must(t)(G.Reshape(q, tensor.Shape{bh * tq, d}))
	mm := must(t)(G.Mul(q2, must(t)(G.Transpose(tab))))
	m3 := must(t)(G.Reshape(mm, tensor.Shape{bh, tq, r}))
	out := must(t)(GatherRel(m3, idx, tq, tk))
	loss := projLoss(t, rng, out, "w")
	run(t, g)

	qd, td := ToFloat64s(qv), ToFloat64s(tv)
	want := make([]float64, bh*tq*tk)
	for b := 0; b < bh; b++ {
		for i := 0; i < tq; i++ {
			for j := 0; j < tk; j++ {
				row := idx[i*tk+j]
				for c := 0; c < d; c++ {
					want[(b*tq+i)*tk+j] += qd[(b*tq+i)*d+c] * td[row*d+c]
				}
			}
		}
	}
	checkClose(t, "q·table[idx]", valueFloat64s(out.Value()), want, 1e-14, 1e-12)
	gradCheck(t, g, loss, q, tab)
}

// TestRelGradOps: the gradient of GatherRel is a ScatterRel with the same
// index and vice versa.
func TestRelGradOps(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	const tq, tk, r = 2, 3, 4
	idx := randIdx(rng, tq, tk, r)
	g := G.NewGraph()
	m := input(g, "m", randDense(rng, tensor.Float64, 1, tq, r))
	p := input(g, "p", randDense(rng, tensor.Float64, 1, tq, tk))
	gather := must(t)(GatherRel(m, idx, tq, tk))
	scatter := must(t)(ScatterRel(p, idx, tq, tk, r))
	loss := must(t)(G.Add(projLoss(t, rng, gather, "wg"), projLoss(t, rng, scatter, "ws")))
	grads, err := G.Grad(loss, m, p)
	if err != nil {
		t.Fatal(err)
	}
	hash := gather.Op().String()[len("GatherRel"):]
	for i, want := range []string{"ScatterRel" + hash, "GatherRel" + hash} {
		if got := grads[i].Op().String(); got != want {
			t.Errorf("gradient %d has op %s, want %s", i, got, want)
		}
	}
}

// TestRelIndexIdentity: nodes applying different index contents to the same
// input must not be merged by Gorgonia (the index is part of the op's hash);
// equal contents may be, and the caller's slice is copied.
func TestRelIndexIdentity(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	const tq, tk, r = 2, 2, 3
	g := G.NewGraph()
	mv := randDense(rng, tensor.Float64, 1, tq, r)
	pv := randDense(rng, tensor.Float64, 1, tq, tk)
	m := input(g, "m", mv)
	p := input(g, "p", pv)
	a := []int{0, 1, 1, 2}
	b := []int{2, 1, 0, 0}
	ga := must(t)(GatherRel(m, a, tq, tk))
	gb := must(t)(GatherRel(m, b, tq, tk))
	sa := must(t)(ScatterRel(p, a, tq, tk, r))
	sb := must(t)(ScatterRel(p, b, tq, tk, r))
	if ga == gb || sa == sb {
		t.Fatal("GatherRel/ScatterRel with different indices were merged into one node")
	}
	if ga.Op().String() == gb.Op().String() || ga.Op().Hashcode() == gb.Op().Hashcode() {
		t.Fatalf("ops %v and %v have equal String or hash", ga.Op(), gb.Op())
	}
	if ga.Op().String() == sa.Op().String() {
		t.Fatalf("gather and scatter share the String %v", ga.Op())
	}
	c := append([]int(nil), a...)
	gc := must(t)(GatherRel(m, c, tq, tk))
	if gc != ga {
		t.Fatal("GatherRel with equal index contents gave a second node")
	}
	c[0], a[0] = 2, 2 // the ops keep their own copies
	run(t, g)
	checkClose(t, "ga", valueFloat64s(ga.Value()), refGatherRel(ToFloat64s(mv), nil, []int{0, 1, 1, 2}, tq, tk, r), 0, 0)
	checkClose(t, "gb", valueFloat64s(gb.Value()), refGatherRel(ToFloat64s(mv), nil, b, tq, tk, r), 0, 0)
	checkClose(t, "sa", valueFloat64s(sa.Value()), refScatterRel(ToFloat64s(pv), nil, []int{0, 1, 1, 2}, tq, tk, r), 0, 0)
	checkClose(t, "sb", valueFloat64s(sb.Value()), refScatterRel(ToFloat64s(pv), nil, b, tq, tk, r), 0, 0)
}

func TestRelErrors(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	g := G.NewGraph()
	m := input(g, "m", randDense(rng, tensor.Float64, 1, 2, 2, 3)) // [2, Tq=2, R=3]
	vec := input(g, "v", randDense(rng, tensor.Float64, 1, 3))
	ids := intInput(g, "ids", []int{0, 1, 2, 0}, 2, 2)
	ok := []int{0, 1, 2, 0}
	for _, c := range []struct {
		name string
		f    func() (*G.Node, error)
		want string
	}{
		{"gather nil", func() (*G.Node, error) { return GatherRel(nil, ok, 2, 2) }, "nil"},
		{"gather int", func() (*G.Node, error) { return GatherRel(ids, ok, 2, 2) }, "dtype"},
		{"gather rank", func() (*G.Node, error) { return GatherRel(vec, ok, 2, 2) }, "rank"},
		{"gather tq", func() (*G.Node, error) { return GatherRel(m, []int{0, 1, 2, 0, 1, 2}, 3, 2) }, "Tq = 3"},
		{"gather len", func() (*G.Node, error) { return GatherRel(m, []int{0, 1, 2}, 2, 2) }, "3 entries"},
		{"gather range", func() (*G.Node, error) { return GatherRel(m, []int{0, 1, 3, 0}, 2, 2) }, "idx[2] = 3"},
		{"gather negative", func() (*G.Node, error) { return GatherRel(m, []int{0, -1, 2, 0}, 2, 2) }, "out of range"},
		{"gather tk", func() (*G.Node, error) { return GatherRel(m, nil, 2, 0) }, "positive"},
		{"scatter nil", func() (*G.Node, error) { return ScatterRel(nil, ok, 2, 2, 3) }, "nil"},
		{"scatter shape", func() (*G.Node, error) { return ScatterRel(m, ok, 2, 2, 3) }, "Tk = 2"},
		{"scatter range", func() (*G.Node, error) { return ScatterRel(m, []int{0, 1, 2, 3, 0, 0}, 2, 3, 3) }, "idx[3] = 3"},
		{"scatter r", func() (*G.Node, error) { return ScatterRel(m, []int{0, 0, 0, 0, 0, 0}, 2, 3, 0) }, "positive"},
	} {
		n, err := c.f()
		if err == nil {
			t.Errorf("%s: no error (node %v)", c.name, n)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q does not mention %q", c.name, err, c.want)
		}
	}
}
