package codestudy

import (
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"

	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// withFeed gives the build positions of a graph a posenc.Feed, so that the
// encodings make the relations input nodes that bindFeed rebinds.
func withFeed(p *posenc.Positions) *posenc.Positions {
	p.Feed = posenc.NewFeed()
	return p
}

// bindFeed binds the relations rel [Batch, TQ, TK] of the next run to the
// Feed of build (positions made by withFeed). The positions are assembled
// around rel without posenc.NewPairwise: its check, copy and content hash
// cost about a tenth of a training step at B = 16, L = 128 (9 ms against
// 90 ms, BenchmarkNewPairwise), and the Feed needs none of them (each
// encoding checks the ids it reads; the gocode relations are in
// [0, NumRel) by construction).
func bindFeed(build *posenc.Positions, rel []int) error {
	if build == nil || build.Feed == nil {
		return errors.New("codestudy: relations bound to positions without a feed")
	}
	if len(rel) != build.Batch*build.TQ*build.TK {
		return errors.Errorf("codestudy: %d relations for positions [%d, %d, %d]", len(rel), build.Batch, build.TQ, build.TK)
	}
	next := &posenc.Positions{Kind: posenc.PosPairwise, Batch: build.Batch, TQ: build.TQ, TK: build.TK, NumRel: build.NumRel, Rel: rel}
	return build.Feed.Bind(next)
}

// fwd runs the LM on ids [B, T] with positions pos (nil: the 1-D span).
func fwd(lm *layers.LM, ids *G.Node, pos *posenc.Positions) (*G.Node, error) {
	return lm.FwdWith(ids, layers.Options{Pos: pos})
}

// treeBounds returns the tree encoding's relation bounds in o (defaults
// filled in).
func treeBounds(o posenc.Options) (up, down int) {
	o = o.Defaults()
	return o.TreeMaxUp, o.TreeMaxDown
}

// setTreeBounds sets the tree encoding's relation bounds in o.
func setTreeBounds(o *posenc.Options, up, down int) { o.TreeMaxUp, o.TreeMaxDown = up, down }
