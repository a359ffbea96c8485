package layers

import (
	"math"
	"math/rand"
	"testing"
)

// TestLMStreamCoPE: in float32 the cope LM with Stream on (posenc's
// StreamAttender, graph.StreamCoPE) computes the logits of the LM with
// Stream off within 1e-5, and its probes count the same rows with close
// entropies and position parts (float64 equality to 1e-12 is posenc's
// stream harness).
func TestLMStreamCoPE(t *testing.T) {
	cfg := tinyConfig("cope")
	w := tinyWeights(t, cfg, 4)
	rng := rand.New(rand.NewSource(9))
	const b, tt = 2, 9
	data := make([]int, b*tt)
	for i := range data {
		data[i] = rng.Intn(256)
	}
	ref, refStats := runLMProbed(t, cfg, w, data, b, tt)
	cfg.Stream = true
	got, gotStats := runLMProbed(t, cfg, w, data, b, tt)
	for i := range ref {
		if d := math.Abs(got[i] - ref[i]); !(d <= 1e-5) {
			t.Fatalf("logit %d: stream %v, materialised %v (diff %g)", i, got[i], ref[i], d)
		}
	}
	for l := range refStats {
		if len(gotStats[l]) != len(refStats[l]) {
			t.Fatalf("block %d: the stream probe recorded %d heads, the materialised one %d", l, len(gotStats[l]), len(refStats[l]))
		}
		for h, r := range refStats[l] {
			g := gotStats[l][h]
			if g.Rows != r.Rows || g.Rows == 0 {
				t.Fatalf("block %d head %d: the stream probe counted %d rows, the materialised one %d", l, h, g.Rows, r.Rows)
			}
			if de, dp := math.Abs(g.EntropyMean-r.EntropyMean), math.Abs(g.PosRMS-r.PosRMS); !(de <= 1e-4 && dp <= 1e-4 && r.PosRMS > 0) {
				t.Fatalf("block %d head %d: stream %+v, materialised %+v", l, h, g, r)
			}
		}
	}
}
