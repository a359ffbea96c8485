package graphstudy

import (
	"fmt"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/graphdata"
	"github.com/rpe-go/rpe/experiments/viz"
	"github.com/rpe-go/rpe/graph"
)

// SpatialBias returns the learned Graphormer spatial bias of a model (the
// shared table "spatial_bias" [R, H] of graphormer-spatial, its rows the
// relations of graphdata: distance 0..maxDist, unreachable, virtual), one
// series per head over the relations 0..maxDist+1 (the virtual token's row
// left out), for plotting with viz.Lines. It returns an error if the model
// has no spatial bias or the table is smaller than maxDist+2 rows.
func SpatialBias(p *graph.Params, maxDist int) ([]viz.Series, error) {
	const name = "spatial_bias"
	info, ok := p.Info(name)
	if !ok {
		return nil, errors.Errorf("spatial bias: the model has no %s (names: %v)", name, p.Names())
	}
	sh := info.Shape
	if len(sh) != 2 || sh[0] < graphdata.NumSpatialRelations(maxDist) {
		return nil, errors.Errorf("spatial bias: %s has shape %v, want [>= %d, H]", name, sh, graphdata.NumSpatialRelations(maxDist))
	}
	vals, h, n := p.Float64s(name), sh[1], graphdata.NumSpatialRelations(maxDist)
	out := make([]viz.Series, h)
	for hh := range out {
		s := viz.Series{Name: fmt.Sprintf("head %d", hh)}
		for r := 0; r < n; r++ {
			s.X = append(s.X, float64(r))
			s.Y = append(s.Y, vals[r*h+hh])
		}
		out[hh] = s
	}
	return out, nil
}

// BiasFrom returns, for every node j of g, the spatial bias that head h of
// series (SpatialBias) adds to the score of query node q attending to j:
// the bias of their relation (distance clipped at maxDist, or
// unreachable). It returns an error if q or h is out of range.
func BiasFrom(series []viz.Series, g *graphdata.Graph, q, h, maxDist int) ([]float64, error) {
	if h < 0 || h >= len(series) {
		return nil, errors.Errorf("spatial bias: head %d of %d", h, len(series))
	}
	if q < 0 || q >= g.N {
		return nil, errors.Errorf("spatial bias: node %d of a graph of %d nodes", q, g.N)
	}
	rel, err := graphdata.SpatialRelations(g, maxDist)
	if err != nil {
		return nil, err
	}
	out := make([]float64, g.N)
	for j := range out {
		r := rel[q*g.N+j]
		if r >= len(series[h].Y) {
			return nil, errors.Errorf("spatial bias: relation %d beyond the series' %d", r, len(series[h].Y))
		}
		out[j] = series[h].Y[r]
	}
	return out, nil
}
