package graph

import (
	"bytes"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestGradCheckReportValues checks every reported element of x -> sum(w*x²)
// against the closed form: analytic = factor*x*w (the op's own, possibly
// wrong, derivative) and numeric ≈ 2*x*w (the true one), and that the
// verdicts agree with GradCheck.
func TestGradCheckReportValues(t *testing.T) {
	for _, factor := range []float64{2, 1.9, 0} {
		g, x, loss := squareGraph(t, factor)
		xs := ToFloat64s(x.Value().(*tensor.Dense))
		w := ToFloat64s(g.ByName("w")[0].Value().(*tensor.Dense))
		res, err := GradCheckReport(g, loss, G.Nodes{x}, GradCheckOpts{})
		if err != nil {
			t.Fatalf("factor %g: %v", factor, err)
		}
		if len(res.Elements) != 12 {
			t.Fatalf("factor %g: %d elements, want 12", factor, len(res.Elements))
		}
		if res.Opts.Eps != 1e-6 || res.Opts.ATol != 1e-6 || res.Opts.RTol != 1e-4 {
			t.Errorf("defaults not filled: %+v", res.Opts)
		}
		for k, e := range res.Elements {
			if e.Node != "x" || e.Index != k || len(e.Coords) != 2 || e.Coords[0] != k/4 || e.Coords[1] != k%4 {
				t.Errorf("element %d: node %q index %d coords %v", k, e.Node, e.Index, e.Coords)
			}
			checkClose(t, "analytic", []float64{e.Analytic}, []float64{factor * xs[k] * w[k]}, 1e-12, 1e-12)
			checkClose(t, "numeric", []float64{e.Numeric}, []float64{2 * xs[k] * w[k]}, 1e-7, 1e-6)
			wantOK := math.Abs(e.Analytic-e.Numeric) <= 1e-6+1e-4*math.Max(math.Abs(e.Analytic), math.Abs(e.Numeric))
			if e.OK != wantOK || e.Tol <= 0 {
				t.Errorf("factor %g element %d: OK %v tol %g, want OK %v", factor, k, e.OK, e.Tol, wantOK)
			}
		}
		g2, x2, loss2 := squareGraph(t, factor)
		gcErr := GradCheck(g2, loss2, G.Nodes{x2}, GradCheckOpts{})
		if (gcErr == nil) != (res.Err() == nil) || (res.Failed() == 0) != (gcErr == nil) {
			t.Errorf("factor %g: GradCheck says %v, report says %v (%d failed)", factor, gcErr, res.Err(), res.Failed())
		}
		if factor == 2 && res.MaxAbsErr() > 1e-7 {
			t.Errorf("right gradient: max |a-n| = %g", res.MaxAbsErr())
		}
		if factor != 2 && (res.Failed() == 0 || !strings.Contains(res.Err().Error(), "of 12 checked elements disagree")) {
			t.Errorf("factor %g: wrong gradient not reported: %v", factor, res.Err())
		}
		checkClose(t, "x after the report", ToFloat64s(x.Value().(*tensor.Dense)), xs, 0, 0)
	}
}

// TestGradCheckReportSubset checks that MaxPerNode picks the same elements
// as GradCheck for the same seed (GradCheck's error names them) and that the
// table is written.
func TestGradCheckReportSubset(t *testing.T) {
	g, x, loss := squareGraph(t, 1)
	res, err := GradCheckReport(g, loss, G.Nodes{x}, GradCheckOpts{MaxPerNode: 3, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Elements) != 3 || res.Failed() != 3 {
		t.Fatalf("%d elements, %d failed, want 3 and 3", len(res.Elements), res.Failed())
	}
	g2, x2, loss2 := squareGraph(t, 1)
	gcErr := GradCheck(g2, loss2, G.Nodes{x2}, GradCheckOpts{MaxPerNode: 3, Seed: 7})
	for _, e := range res.Elements {
		if !strings.Contains(gcErr.Error(), "element "+strconv.Itoa(e.Index)+" ") {
			t.Errorf("GradCheck error %q does not name element %d", gcErr, e.Index)
		}
	}
	var b bytes.Buffer
	if err := res.WriteTable(&b, 2); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(b.String(), "\n"); lines != 3 || !strings.Contains(b.String(), "NO") {
		t.Errorf("table of 2 rows:\n%s", b.String())
	}
}

// TestGradCheckReportErrors checks that a check that cannot be made is an
// error, not a report.
func TestGradCheckReportErrors(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	g := G.NewGraph()
	x := input(g, "x", randDense(rng, tensor.Float64, 1, 2, 3))
	y := must(t)(GELU(x))
	loss := projLoss(t, rng, y, "w")
	unused := input(g, "unused", randDense(rng, tensor.Float64, 1, 2))
	for _, c := range []struct {
		name string
		loss *G.Node
		wrt  G.Nodes
		want string
	}{
		{"non-scalar loss", y, G.Nodes{x}, "scalar"},
		{"not input", loss, G.Nodes{y}, "not an input"},
		{"empty", loss, nil, "no nodes"},
		{"unused", loss, G.Nodes{unused}, "G.Grad"},
	} {
		_, err := GradCheckReport(g, c.loss, c.wrt, GradCheckOpts{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}
