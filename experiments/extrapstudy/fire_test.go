package extrapstudy

import (
	"context"
	"math"
	"strings"
	"testing"
)

// TestFireDiagnose: the diagnosis reads a trained fire model's c and L, its
// bias at distance 0 is the same for every query (the MLP's input ψ(0)/… is
// 0), Input is the formula of posenc.FIRE, the plot and report are made;
// a model of another encoding is refused.
func TestFireDiagnose(t *testing.T) {
	p := tinyPlan("fire", "alibi")
	dir := t.TempDir()
	if _, err := Run(context.Background(), p, tinyCorpus(t), Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	ms, err := FireDiagnose(dir, []string{"fire-seed1"}, []int{7, 15, 31}, 7)
	if err != nil {
		t.Fatal(err)
	}
	m := ms[0]
	if m.TrainLen != 8 || m.InitL != 512 || !(m.C > 0) || !(m.L > 0) || len(m.Bias) != 3 || len(m.Bias[0]) != 2 || len(m.Bias[0][0]) != 8 {
		t.Fatalf("model %+v", m)
	}
	for h := range m.Bias[0] {
		for qi := range m.Queries {
			if math.Abs(m.Bias[qi][h][0]-m.Bias[0][h][0]) > 1e-12 {
				t.Errorf("head %d: bias at distance 0 differs between queries %d and %d", h, m.Queries[0], m.Queries[qi])
			}
		}
	}
	want := math.Log(m.C*3+1) / (math.Log(m.C*math.Max(m.L, 31)+1) + 1e-6)
	if math.Abs(m.Input(3, 31)-want) > 1e-12 {
		t.Errorf("Input(3, 31) = %v, want %v", m.Input(3, 31), want)
	}
	if png, err := FirePlot(ms); err != nil || len(png) < 1000 {
		t.Errorf("plot: %v", err)
	}
	if r := FireReport(ms); !strings.Contains(r, "| fire-seed1 | 8 | 512 |") {
		t.Errorf("report:\n%s", r)
	}
	if _, err := FireDiagnose(dir, []string{"alibi-seed1"}, []int{7}, 7); err == nil || !strings.Contains(err.Error(), "not fire") {
		t.Errorf("alibi model: %v", err)
	}
}
