package codestudy

import (
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"

	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// PRE-MERGE SHIM: replaced by the core14 API once main has it.

func withFeed(p *posenc.Positions) *posenc.Positions { return p }

func bindFeed(build *posenc.Positions, rel []int) error {
	return errors.New("codestudy: feeds need the core14 API")
}

func fwd(lm *layers.LM, ids *G.Node, pos *posenc.Positions) (*G.Node, error) {
	if pos != nil {
		return nil, errors.New("codestudy: pairwise positions need the core14 API")
	}
	return lm.Fwd(ids)
}

func treeBounds(o posenc.Options) (up, down int) { return 4, 4 }

func setTreeBounds(o *posenc.Options, up, down int) {}
