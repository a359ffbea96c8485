package extrapstudy

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/experiments/viz"
	"github.com/rpe-go/rpe/posenc"
)

// FireModel is what FireDiagnose reads of one trained fire model: its
// learned ψ scale c and threshold L = |l_mult·init_L|, and its score bias
// against the distance d = 0..MaxDist for queries at each of Queries
// (Bias[q][h][d], head h).
type FireModel struct {
	Key      string
	TrainLen int
	InitL    float64
	C, L     float64
	Queries  []int
	Bias     [][][]float64
}

// Input is the MLP's input for a key at distance d from a query at
// position q: ψ(d) / ψ(max(L, q)), ψ(x) = log(c·x + 1) (posenc.FIRE).
func (m FireModel) Input(d, q int) float64 {
	psi := func(x float64) float64 { return math.Log(m.C*x + 1) }
	return psi(float64(d)) / (psi(math.Max(m.L, float64(q))) + posenc.FireEps)
}

// FireDiagnose reads the fire model of each key (models/<key>/ckpt.safetensors
// under dir) and evaluates its trained score bias (block 0: fire's bias is
// shared by the layers) for a query at each of queries against the keys at
// distance 0..maxDist before it. Errors name the model.
func FireDiagnose(dir string, keys []string, queries []int, maxDist int) ([]FireModel, error) {
	var out []FireModel
	for _, k := range keys {
		path := filepath.Join(dir, "models", k, "ckpt.safetensors")
		params, cfg, err := trainer.LoadModel(path)
		if err != nil {
			return nil, err
		}
		if cfg.Model.Pos != "fire" {
			return nil, errors.Errorf("fire diagnosis: %s is a %s model, not fire", path, cfg.Model.Pos)
		}
		enc, err := posenc.New("fire", cfg.Model.PosOpts)
		if err != nil {
			return nil, errors.WithMessage(err, path)
		}
		m := FireModel{Key: k, TrainLen: cfg.SeqLen, InitL: cfg.Model.PosOpts.Defaults().FireInitL, Queries: queries,
			C: math.Abs(params.Float64s("fire_c")[0])}
		m.L = math.Abs(params.Float64s("fire_l_mult")[0] * m.InitL)
		for _, q := range queries {
			if q < maxDist {
				return nil, errors.Errorf("fire diagnosis: query position %d is below the largest distance %d", q, maxDist)
			}
			ms, err := viz.ScoreBias(enc, posenc.Span{QStart: q, TQ: 1, KStart: q - maxDist, TK: maxDist + 1},
				viz.BiasOptions{Params: params, Heads: cfg.Model.Heads, Causal: true})
			if err != nil {
				return nil, errors.WithMessage(err, path)
			}
			perHead := make([][]float64, len(ms))
			for h, mat := range ms {
				row := mat.Row(0) // keys q-maxDist .. q
				b := make([]float64, maxDist+1)
				for d := range b {
					b[d] = row[maxDist-d]
				}
				perHead[h] = b
			}
			m.Bias = append(m.Bias, perHead)
		}
		out = append(out, m)
	}
	return out, nil
}

// FirePlot draws the models' bias against distance, one panel per model
// and head, one line per query position.
func FirePlot(ms []FireModel) ([]byte, error) {
	var panels [][]viz.Series
	var titles []string
	for _, m := range ms {
		for h := range m.Bias[0] {
			var ss []viz.Series
			for qi, q := range m.Queries {
				ss = append(ss, viz.Series{Name: fmt.Sprintf("query at %d", q), X: viz.IntRange(0, len(m.Bias[qi][h])-1), Y: m.Bias[qi][h]})
			}
			panels = append(panels, ss)
			titles = append(titles, fmt.Sprintf("%s, head %d", m.Key, h))
		}
	}
	if len(panels) == 0 {
		return nil, errors.New("fire diagnosis: no model")
	}
	cols := len(ms[0].Bias[0])
	return viz.LineGrid(panels, titles, cols, viz.LineOptions{XLabel: "distance to the key", YLabel: "score bias",
		Width: 380 * cols, Height: 340 * len(ms), LegendBottom: true})
}

// FireReport is the Markdown of the diagnosis: each model's learned c and L
// against its training length, and the MLP's inputs at a few distances for
// queries at the training length and at the longest query position.
func FireReport(ms []FireModel) string {
	var b strings.Builder
	if len(ms) == 0 {
		return ""
	}
	qs := ms[0].Queries
	first, last := qs[0], qs[len(qs)-1]
	ds := []int{1, 2, 8, ms[0].TrainLen - 1}
	b.WriteString("| model | train L | init L | learned c | learned L |")
	for _, d := range ds {
		fmt.Fprintf(&b, " input at d = %d, q = %d → %d |", d, first, last)
	}
	b.WriteString("\n|---|---:|---:|---:|---:|")
	for range ds {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, m := range ms {
		fmt.Fprintf(&b, "| %s | %d | %g | %.4f | %.1f |", m.Key, m.TrainLen, m.InitL, m.C, m.L)
		for _, d := range ds {
			fmt.Fprintf(&b, " %.3f → %.3f |", m.Input(d, first), m.Input(d, last))
		}
		b.WriteString("\n")
	}
	return b.String()
}
