package graphdata

import (
	"math"
	"math/rand/v2"
	"strings"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/posenc"
)

// BatchOptions configure NewBatch.
type BatchOptions struct {
	// MaxDist clips the spatial relations (>= 1): the batch has
	// NumSpatialRelations(MaxDist) relation ids.
	MaxDist int
	// MaxNodes is the configured largest graph (0: no limit); a larger
	// graph in the batch is an error.
	MaxNodes int
	// LapK > 0 adds the Laplacian positional encoding with LapK
	// eigenvectors per node (Batch.LapPE).
	LapK int
	// Flip, if not nil, flips the signs of each graph's Laplacian
	// eigenvectors at random (FlipSigns; for training batches).
	Flip *rand.Rand
	// Cache, if not nil, keeps each graph's distances and Laplacian
	// encoding across batches (keyed by Example.ID).
	Cache *DistanceCache
}

// Batch is a padded batch of B graphs for a Transformer over nodes: graph
// b's nodes are tokens 0..Nodes[b]-1 of row b, and tokens Nodes[b]..N-1 are
// padding. N is the largest graph of the batch.
type Batch struct {
	B, N, F int
	// Nodes [B] is the number of real nodes of each graph.
	Nodes []int
	// X [B*N*F] row-major [B, N, F] holds the node features, 0 for padding.
	X []float32
	// Valid [B][N] is true for real nodes (graph.PaddingMask's input);
	// Mask [B*N] is the same as 1 (real) and 0 (padding).
	Valid [][]bool
	Mask  []float32
	// Rel [B*N*N] row-major [B, N, N] holds the spatial relation of every
	// pair (SpatialRelations with MaxDist) in [0, NumRel). A pair with a
	// padding node (either side, including padding with itself) has the
	// unreachable relation UnreachableRelation(MaxDist): padding nodes
	// are not connected to anything. Their keys are masked and their
	// labels ignored, so with a correct key mask and masked pooling that
	// table entry gets no gradient from padding.
	Rel    []int
	NumRel int
	// Degrees [B*N] row-major [B, N] is each node's degree (for the
	// centrality encoding), 0 for padding (and for isolated nodes: use
	// Valid to tell them apart).
	Degrees []int
	// LapPE [B*N*LapK] row-major [B, N, LapK] is the Laplacian positional
	// encoding (LaplacianPE, signs flipped if BatchOptions.Flip), 0 for
	// padding; nil when LapK is 0.
	LapPE []float32
	LapK  int
	// Labels: [B*N] row-major [B, N] for a per-node task with -1 for
	// padding nodes (CrossEntropy ignores negative targets); [B] for a
	// per-graph task.
	Labels  []int
	PerNode bool
	// Targets [B] are the graphs' Example.Target of a regression data
	// set (Dataset.Regression; Labels is then nil), else nil.
	Targets []float64
}

// NewBatch pads the examples idx of ds into a Batch. It returns an error
// for an empty idx, an index outside ds, MaxDist < 1, LapK < 0, a graph
// larger than MaxNodes or malformed, or an example whose features or
// labels do not match its graph and ds.
func NewBatch(ds *Dataset, idx []int, o BatchOptions) (*Batch, error) {
	if ds == nil || len(idx) == 0 {
		return nil, errors.New("graphdata: empty batch")
	}
	if o.MaxDist < 1 {
		return nil, errors.Errorf("graphdata: batch: maximum distance %d must be at least 1", o.MaxDist)
	}
	if o.LapK < 0 {
		return nil, errors.Errorf("graphdata: batch: Laplacian encoding size %d is negative", o.LapK)
	}
	f := ds.NumFeatures
	if f < 1 {
		return nil, errors.Errorf("graphdata: batch: data set has %d features per node", f)
	}
	exs := make([]*Example, len(idx))
	n := 0
	for b, i := range idx {
		if i < 0 || i >= len(ds.Examples) {
			return nil, errors.Errorf("graphdata: batch: example %d is outside the %d examples", i, len(ds.Examples))
		}
		ex := ds.Examples[i]
		if ex == nil {
			return nil, errors.Errorf("graphdata: batch: example %d is nil", i)
		}
		if err := ex.Graph.Check(o.MaxNodes); err != nil {
			return nil, errors.Errorf("graphdata: batch: example %d (%s): %s", i, ex.ID, strings.TrimPrefix(err.Error(), "graphdata: "))
		}
		gn := ex.Graph.N
		nl := 1
		switch {
		case ds.Regression && ds.PerNode:
			return nil, errors.New("graphdata: batch: a regression data set must be per graph")
		case ds.Regression:
			nl = 0
			if math.IsNaN(ex.Target) || math.IsInf(ex.Target, 0) {
				return nil, errors.Errorf("graphdata: batch: example %d (%s) has target %v, not a finite number", i, ex.ID, ex.Target)
			}
		case ds.PerNode:
			nl = gn
		}
		if len(ex.Features) != gn*f || len(ex.Labels) != nl {
			return nil, errors.Errorf("graphdata: batch: example %d (%s) has %d features and %d labels, want %d*%d and %d",
				i, ex.ID, len(ex.Features), len(ex.Labels), gn, f, nl)
		}
		for _, l := range ex.Labels {
			if l < 0 || l >= ds.NumClasses {
				return nil, errors.Errorf("graphdata: batch: example %d (%s) has label %d outside [0, %d)", i, ex.ID, l, ds.NumClasses)
			}
		}
		exs[b] = ex
		n = max(n, gn)
	}
	bs := len(idx)
	bt := &Batch{B: bs, N: n, F: f, Nodes: make([]int, bs), X: make([]float32, bs*n*f),
		Valid: make([][]bool, bs), Mask: make([]float32, bs*n), Rel: make([]int, bs*n*n),
		NumRel: NumSpatialRelations(o.MaxDist), Degrees: make([]int, bs*n), PerNode: ds.PerNode, LapK: o.LapK}
	if o.LapK > 0 {
		bt.LapPE = make([]float32, bs*n*o.LapK)
	}
	switch {
	case ds.Regression:
		bt.Targets = make([]float64, bs)
	case ds.PerNode:
		bt.Labels = make([]int, bs*n)
		for i := range bt.Labels {
			bt.Labels[i] = -1
		}
	default:
		bt.Labels = make([]int, bs)
	}
	unreach := UnreachableRelation(o.MaxDist)
	for i := range bt.Rel {
		bt.Rel[i] = unreach
	}
	for b, ex := range exs {
		g := ex.Graph
		gn := g.N
		bt.Nodes[b] = gn
		bt.Valid[b] = make([]bool, n)
		copy(bt.X[b*n*f:], ex.Features)
		var dist []int
		var err error
		if o.Cache != nil {
			dist, err = o.Cache.Distances(ex.ID, g)
		} else {
			dist = ShortestPaths(g)
		}
		if err != nil {
			return nil, err
		}
		rel, err := DistanceRelations(dist, gn, o.MaxDist)
		if err != nil {
			return nil, err
		}
		for i := 0; i < gn; i++ {
			bt.Valid[b][i] = true
			bt.Mask[b*n+i] = 1
			bt.Degrees[b*n+i] = len(g.Adj[i])
			copy(bt.Rel[(b*n+i)*n:], rel[i*gn:(i+1)*gn])
		}
		switch {
		case ds.Regression:
			bt.Targets[b] = ex.Target
		case ds.PerNode:
			copy(bt.Labels[b*n:], ex.Labels)
		default:
			bt.Labels[b] = ex.Labels[0]
		}
		if o.LapK > 0 {
			var pe []float64
			if o.Cache != nil {
				pe, err = o.Cache.LaplacianPE(ex.ID, g, o.LapK)
			} else {
				pe, err = LaplacianPE(g, o.LapK)
			}
			if err != nil {
				return nil, err
			}
			if o.Flip != nil {
				pe = append([]float64(nil), pe...) // the cached copy stays unflipped
				if err := FlipSigns(pe, gn, o.LapK, o.Flip); err != nil {
					return nil, err
				}
			}
			dst := bt.LapPE[b*n*o.LapK:]
			for i, v := range pe {
				dst[i] = float32(v)
			}
		}
	}
	return bt, nil
}

// Positions returns the batch's relations as per-example pairwise
// positions for attention: posenc.NewPairwise(B, N, N, NumRel, Rel).
func (bt *Batch) Positions() (*posenc.Positions, error) {
	return posenc.NewPairwise(bt.B, bt.N, bt.N, bt.NumRel, bt.Rel)
}
