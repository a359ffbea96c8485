package posenc_test

import (
	"math"
	"math/rand"
	"testing"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

func TestAlibi2DTable(t *testing.T) {
	slopes := []float64{0.5, 0.25}
	got := posenc.Alibi2DTable(slopes, 2, 3) // rows dr*3 + dc
	want := []float64{
		0, 0, // (0, 0)
		-0.5, -0.25, // (0, 1)
		-1, -0.5, // (0, 2)
		-0.5, -0.25, // (1, 0)
		-0.5 * math.Sqrt2, -0.25 * math.Sqrt2, // (1, 1)
		-0.5 * math.Sqrt(5), -0.25 * math.Sqrt(5), // (1, 2)
	}
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("table[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	if math.Signbit(got[0]) {
		t.Errorf("zero distance gives -0")
	}
}

// TestAlibi2DBias: the bias of random query and key cells, several head
// counts and both dtypes, equals -m_h·sqrt(Δr² + Δc²) computed per element;
// it has no parameters.
func TestAlibi2DBias(t *testing.T) {
	rng := rand.New(rand.NewSource(12))
	enc := posenc.NewAlibi2D()
	for n := 0; n < 12; n++ {
		rows, cols := 1+rng.Intn(6), 1+rng.Intn(6)
		tq, tk, h := 1+rng.Intn(7), 1+rng.Intn(7), 1+rng.Intn(8)
		q, k := randomCoords(rng, tq, rows, cols), randomCoords(rng, tk, rows, cols)
		pos, err := posenc.NewGridCoords([]int{rows, cols}, q, k)
		if err != nil {
			t.Fatal(err)
		}
		dt := tensor.Float64
		tol := 1e-14 // (math.Hypot and the table's Sqrt may differ by an ulp)
		if n%2 == 1 {
			dt, tol = tensor.Float32, 1e-6
		}
		s := gridSite(pos, h)
		s.Params = graph.NewParams(dt, 1)
		b, err := enc.ScoreBias(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := b.Shape(); len(got) != 3 || got[0] != h || got[1] != tq || got[2] != tk {
			t.Fatalf("bias shape %v, want [%d %d %d]", got, h, tq, tk)
		}
		if len(s.Params.Names()) != 0 {
			t.Fatalf("alibi-2d created parameters %v", s.Params.Names())
		}
		got := runValue(t, s, b)
		m := posenc.AlibiSlopes(h)
		for hh := 0; hh < h; hh++ {
			for i := 0; i < tq; i++ {
				for j := 0; j < tk; j++ {
					want := -m[hh] * math.Hypot(float64(q[2*i]-k[2*j]), float64(q[2*i+1]-k[2*j+1]))
					if g := got[(hh*tq+i)*tk+j]; math.Abs(g-want) > tol*(1+math.Abs(want)) {
						t.Fatalf("%dx%d grid, %d heads: bias[%d, %d, %d] = %v, want %v", rows, cols, h, hh, i, j, g, want)
					}
				}
			}
		}
	}
}
