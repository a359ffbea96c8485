package extrapstudy

import (
	"math"
	"slices"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/viz"
)

// FileProtocols is the figure of the long-text protocols: a panel per
// trained encoding, bits per byte against the length for each protocol.
const FileProtocols = "protocols.png"

// ProtocolPlot draws the long-text protocols of rows into a PNG at path: a
// panel per encoding that was trained (not a RoPE scaling), bits per byte
// against the evaluation length (log axis) with one line per protocol
// (the full context, then each long-text protocol in the rows), each point
// the mean over seeds with its 95% t interval as an error bar. It returns
// an error if no row has a long-text protocol.
func ProtocolPlot(rows []Row, path string) error {
	var encs, prs []string
	var lens []int
	for _, r := range rows {
		if !isLongText(r.Protocol) {
			continue
		}
		if !slices.Contains(encs, r.Encoding) {
			encs = append(encs, r.Encoding)
		}
		if !slices.Contains(prs, r.Protocol) {
			prs = append(prs, r.Protocol)
		}
	}
	if len(encs) == 0 {
		return errors.Errorf("protocol plot %s: no row has a long-text protocol", path)
	}
	prs = append([]string{ProtocolAll}, prs...)
	type key struct {
		e, pr string
		le    int
	}
	vals := map[key][]float64{}
	for _, r := range rows {
		if r.Status != StatusOK || !slices.Contains(encs, r.Encoding) || !slices.Contains(prs, r.Protocol) {
			continue
		}
		k := key{r.Encoding, r.Protocol, r.EvalLen}
		vals[k] = append(vals[k], r.BitsPerByte)
		if !slices.Contains(lens, r.EvalLen) {
			lens = append(lens, r.EvalLen)
		}
	}
	slices.Sort(lens)
	var panels [][]viz.Series
	var titles []string
	for _, e := range encs {
		var panel []viz.Series
		for _, pr := range prs {
			s := viz.Series{Name: pr}
			if pr == ProtocolAll {
				s.Name = "full"
			}
			for _, le := range lens {
				v := vals[key{e, pr, le}]
				if len(v) == 0 {
					continue
				}
				c := study.NewCell(v)
				lo, hi := c.Lo, c.Hi
				if math.IsNaN(lo) { // one seed
					lo, hi = c.Mean, c.Mean
				}
				s.X, s.Y, s.Lo, s.Hi = append(s.X, float64(le)), append(s.Y, c.Mean), append(s.Lo, lo), append(s.Hi, hi)
			}
			if len(s.X) > 0 {
				panel = append(panel, s)
			}
		}
		if len(panel) > 0 {
			panels, titles = append(panels, panel), append(titles, e)
		}
	}
	xt := make([]float64, len(lens))
	for i, le := range lens {
		xt[i] = float64(le)
	}
	png, err := viz.LineGrid(panels, titles, min(4, len(panels)), viz.LineOptions{
		Title:  "long-text protocols (mean over seeds, 95% t interval)",
		XLabel: "evaluation length Le (bytes)", YLabel: "bits per byte", LogX: true, XTicks: xt, LegendLeft: true})
	if err != nil {
		return errors.WithMessagef(err, "protocol plot %s", path)
	}
	return study.WriteFileAtomic(path, png)
}
