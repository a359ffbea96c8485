package graph

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Forward values of LayerNorm, GELU, CrossEntropy and Embedding against
// hand-computed numbers and direct implementations, and their errors.

func TestLayerNormHandValues(t *testing.T) {
	g := G.NewGraph()
	x := input(g, "x", fromFloat64(tensor.Float64, tensor.Shape{2, 4}, []float64{1, 2, 3, 4, 5, 5, 5, 5}))
	gm := input(g, "gamma", fromFloat64(tensor.Float64, tensor.Shape{4}, []float64{1, 1, 2, 1}))
	bt := input(g, "beta", fromFloat64(tensor.Float64, tensor.Shape{4}, []float64{0, 0, 0, 10}))
	y := must(t)(LayerNorm(x, gm, bt, 0))
	run(t, g)
	// Row 0: mean 2.5, biased variance 1.25. Row 1 is constant: var 0, and
	// with eps = 0 the result is NaN (as in PyTorch); see the eps case below.
	r := 1 / math.Sqrt(1.25)
	got := valueFloat64s(y.Value())
	checkClose(t, "row 0", got[:4], []float64{-1.5 * r, -0.5 * r, 2 * 0.5 * r, 1.5*r + 10}, 1e-15, 1e-14)

	g = G.NewGraph()
	x = input(g, "x", fromFloat64(tensor.Float64, tensor.Shape{1, 1, 2}, []float64{5, 5}))
	gm = input(g, "gamma", fromFloat64(tensor.Float64, tensor.Shape{2}, []float64{1, 1}))
	bt = input(g, "beta", fromFloat64(tensor.Float64, tensor.Shape{2}, []float64{3, -3}))
	y = must(t)(LayerNorm(x, gm, bt, 1e-5))
	run(t, g)
	checkClose(t, "constant row", valueFloat64s(y.Value()), []float64{3, -3}, 0, 0)
}

// refLayerNorm is a direct float64 implementation.
func refLayerNorm(x, gamma, beta []float64, d int, eps float64) []float64 {
	y := make([]float64, len(x))
	for r := 0; r < len(x); r += d {
		var mean, v float64
		for _, a := range x[r : r+d] {
			mean += a / float64(d)
		}
		for _, a := range x[r : r+d] {
			v += (a - mean) * (a - mean) / float64(d)
		}
		for j := 0; j < d; j++ {
			y[r+j] = (x[r+j]-mean)/math.Sqrt(v+eps)*gamma[j] + beta[j]
		}
	}
	return y
}

func TestLayerNormValues(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for _, shape := range []tensor.Shape{{3, 7}, {2, 3, 5}, {2, 1, 3, 8}} {
		g := G.NewGraph()
		d := shape[len(shape)-1]
		xv := randDense(rng, tensor.Float64, 3, shape...)
		gv := randDense(rng, tensor.Float64, 1, d)
		bv := randDense(rng, tensor.Float64, 1, d)
		y := must(t)(LayerNorm(input(g, "x", xv), input(g, "gamma", gv), input(g, "beta", bv), 1e-5))
		run(t, g)
		if !y.Shape().Eq(shape) {
			t.Fatalf("shape %v, want %v", y.Shape(), shape)
		}
		want := refLayerNorm(ToFloat64s(xv), ToFloat64s(gv), ToFloat64s(bv), d, 1e-5)
		checkClose(t, "LayerNorm", valueFloat64s(y.Value()), want, 1e-14, 1e-12)
	}
}

func TestLayerNormErrors(t *testing.T) {
	rng := rand.New(rand.NewSource(12))
	g := G.NewGraph()
	x := input(g, "x", randDense(rng, tensor.Float64, 1, 2, 4))
	x1 := input(g, "x1", randDense(rng, tensor.Float64, 1, 4))
	g4 := input(g, "g4", randDense(rng, tensor.Float64, 1, 4))
	g3 := input(g, "g3", randDense(rng, tensor.Float64, 1, 3))
	g32 := input(g, "g32", randDense(rng, tensor.Float32, 1, 4))
	for _, c := range []struct {
		name           string
		x, gamma, beta *G.Node
		eps            float64
		want           string
	}{
		{"rank 1", x1, g4, g4, 1e-5, "rank >= 2"},
		{"gamma size", x, g3, g4, 1e-5, "(3)"},
		{"beta size", x, g4, g3, 1e-5, "(3)"},
		{"dtype", x, g32, g4, 1e-5, "float32"},
		{"eps", x, g4, g4, -1, "eps"},
		{"nil", x, nil, g4, 1e-5, "nil"},
	} {
		_, err := LayerNorm(c.x, c.gamma, c.beta, c.eps)
		if err == nil || !strings.Contains(err.Error(), "LayerNorm") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming LayerNorm and %q", c.name, err, c.want)
		}
	}
}

func TestGELUHandValues(t *testing.T) {
	g := G.NewGraph()
	x := input(g, "x", fromFloat64(tensor.Float64, tensor.Shape{6}, []float64{1, -1, 0, 2, -3, 0.5}))
	y := must(t)(GELU(x))
	run(t, g)
	// PyTorch: torch.nn.functional.gelu(x, approximate="tanh").
	want := []float64{0.8411919906082768, -0.15880800939172324, 0, 1.954597694087775, -0.0036373920817729943, 0.34571400982514394}
	checkClose(t, "GELU", valueFloat64s(y.Value()), want, 1e-16, 1e-14)
	if _, err := GELU(G.NewScalar(g, tensor.Float64, G.WithName("s"), G.WithValue(1.0))); err == nil {
		t.Error("scalar x: no error")
	}
}

func TestCrossEntropyHandValues(t *testing.T) {
	logits := []float64{
		0, 0, 0,
		1, 2, 3,
		50, -50, 7, // ignored
		1000, 0, 1000, // large logits: stable
	}
	for _, c := range []struct {
		targets []int
		want    float64
	}{
		{[]int{1, 2, -1, 0}, (math.Log(3) + 0.40760596444438013 + math.Log(2)) / 3},
		{[]int{-1, 0, -5, -1}, 2.40760596444438013},
		{[]int{-1, -1, -1, -1}, 0},
	} {
		g := G.NewGraph()
		l := input(g, "logits", fromFloat64(tensor.Float64, tensor.Shape{4, 3}, logits))
		loss := must(t)(CrossEntropy(l, intInput(g, "t", c.targets, 4)))
		if !loss.IsScalar() || loss.Dtype() != tensor.Float64 {
			t.Fatalf("loss %v %v, want a float64 scalar", loss.Shape(), loss.Dtype())
		}
		if _, err := G.Grad(loss, l); err != nil {
			t.Fatal(err)
		}
		m := G.NewTapeMachine(g, G.BindDualValues(l))
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		checkClose(t, "loss", valueFloat64s(loss.Value()), []float64{c.want}, 1e-15, 1e-13)
		gv, _ := l.Grad()
		dl := valueFloat64s(gv)
		for r, tg := range c.targets {
			if tg >= 0 {
				continue
			}
			for j := 0; j < 3; j++ {
				if dl[r*3+j] != 0 {
					t.Fatalf("targets %v: gradient of ignored row %d = %v, want 0", c.targets, r, dl[r*3:r*3+3])
				}
			}
		}
		m.Close()
	}
}

func TestCrossEntropyErrors(t *testing.T) {
	rng := rand.New(rand.NewSource(13))
	g := G.NewGraph()
	l := input(g, "logits", randDense(rng, tensor.Float64, 1, 3, 5))
	bad := intInput(g, "bad", []int{0, 5, 1}, 3)
	loss := must(t)(CrossEntropy(l, bad))
	m := G.NewTapeMachine(g)
	err := m.RunAll()
	m.Close()
	if err == nil || !strings.Contains(err.Error(), "target 5") || !strings.Contains(err.Error(), "V = 5") {
		t.Errorf("target out of range: error %v", err)
	}
	_ = loss
	for _, c := range []struct {
		name            string
		logits, targets *G.Node
		want            string
	}{
		{"targets length", l, intInput(g, "t2", []int{0, 1}, 2), "(2)"},
		{"logits rank", input(g, "l3", randDense(rng, tensor.Float64, 1, 3, 5, 1)), intInput(g, "t3", []int{0, 1, 2}, 3), "(3, 5, 1)"},
		{"float targets", l, input(g, "tf", randDense(rng, tensor.Float64, 1, 3)), "tensor.Int"},
		{"int logits", intInput(g, "li", make([]int, 15), 3, 5), intInput(g, "t4", []int{0, 1, 2}, 3), "dtype int"},
	} {
		_, err := CrossEntropy(c.logits, c.targets)
		if err == nil || !strings.Contains(err.Error(), "CrossEntropy") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming CrossEntropy and %q", c.name, err, c.want)
		}
	}
}

func TestEmbeddingValues(t *testing.T) {
	g := G.NewGraph()
	table := []float64{0, 1, 10, 11, 20, 21, 30, 31}
	tb := input(g, "table", fromFloat64(tensor.Float64, tensor.Shape{4, 2}, table))
	ids := []int{3, 0, 3, 2, 2, 2}
	y := must(t)(Embedding(tb, intInput(g, "ids", ids, 2, 3)))
	if !y.Shape().Eq(tensor.Shape{2, 3, 2}) {
		t.Fatalf("shape %v", y.Shape())
	}
	// Repeated ids: the gradient of a row is the sum of the weights of every
	// position that looked it up.
	wv := fromFloat64(tensor.Float64, tensor.Shape{2, 3, 2}, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	loss := must(t)(G.Sum(must(t)(BroadcastMul(y, input(g, "w", wv)))))
	if _, err := G.Grad(loss, tb); err != nil {
		t.Fatal(err)
	}
	m := G.NewTapeMachine(g, G.BindDualValues(tb))
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	checkClose(t, "y", valueFloat64s(y.Value()), []float64{30, 31, 0, 1, 30, 31, 20, 21, 20, 21, 20, 21}, 0, 0)
	gv, _ := tb.Grad()
	checkClose(t, "dtable", valueFloat64s(gv), []float64{3, 4, 0, 0, 7 + 9 + 11, 8 + 10 + 12, 1 + 5, 2 + 6}, 0, 0)
}

func TestEmbeddingErrors(t *testing.T) {
	rng := rand.New(rand.NewSource(14))
	for _, id := range []int{4, -1} {
		g := G.NewGraph()
		tb := input(g, "table", randDense(rng, tensor.Float64, 1, 4, 2))
		must(t)(Embedding(tb, intInput(g, "ids", []int{0, id}, 2)))
		m := G.NewTapeMachine(g)
		err := m.RunAll()
		m.Close()
		if err == nil || !strings.Contains(err.Error(), "Embedding") || !strings.Contains(err.Error(), "V = 4") {
			t.Errorf("id %d: error %v", id, err)
		}
	}
	g := G.NewGraph()
	tb3 := input(g, "t3", randDense(rng, tensor.Float64, 1, 4, 2, 1))
	if _, err := Embedding(tb3, intInput(g, "ids", []int{0}, 1)); err == nil || !strings.Contains(err.Error(), "(4, 2, 1)") {
		t.Errorf("rank-3 table: error %v", err)
	}
	tb := input(g, "table", randDense(rng, tensor.Float64, 1, 4, 2))
	if _, err := Embedding(tb, input(g, "fids", randDense(rng, tensor.Float64, 1, 2))); err == nil || !strings.Contains(err.Error(), "tensor.Int") {
		t.Errorf("float ids: error %v", err)
	}
}
