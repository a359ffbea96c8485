package posenc

import (
	"slices"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

// Graph position encodings (issue #14): Graphormer's spatial and
// centrality encodings and the Laplacian-eigenvector input of Dwivedi &
// Bresson. They serve pairwise positions (PosPairwise) whose relations are
// Graphormer spatial relations, as experiments/graphdata builds them
// (SpatialRelations, Batch.Positions):
//
//	rel(i, j) = min(d(i, j), maxDist)   reachable pair at hop distance d (0: i == j, 1: adjacent)
//	rel(i, j) = maxDist + 1             unreachable pair, and every pair with a padding node
//	rel(i, j) = maxDist + 2             a pair with a virtual (graph) token (WithVirtualNode)
//
// maxDist+2 relations without a virtual token, maxDist+3 with one.

func init() {
	register(Info{Name: "graphormer-spatial", Kind: KindStructural, Learnable: true}, func(o Options) (Encoding, error) {
		if o.GraphMaxDist < 1 {
			return nil, errors.Errorf("posenc graphormer-spatial: maximum distance %d must be at least 1", o.GraphMaxDist)
		}
		e, err := NewGraphormerSpatial(o.GraphMaxDist+3, o.InitStd, false)
		if err != nil {
			return nil, err
		}
		e.Alpha = o.Alpha
		return e, nil
	})
	register(Info{Name: "graphormer-centrality", Kind: KindStructural, Learnable: true}, func(o Options) (Encoding, error) {
		return NewGraphormerCentrality(o.GraphMaxDegree, o.InitStd)
	})
}

// GraphAdjacentRelation is the relation id of adjacent nodes (hop distance
// 1) in Graphormer spatial relations; GraphormerCentrality counts it to get
// the degrees.
const GraphAdjacentRelation = 1

// GraphormerSpatial is Graphormer's spatial encoding (Ying et al. 2021,
// "Do Transformers Really Perform Bad for Graph Representation?",
// NeurIPS): a learnable scalar per head for every spatial relation
// (shortest-path distance bucket) between a query node and a key node,
// added to the scaled scores:
//
//	scores[b, h, i, j] = q_i·k_j / sqrt(dh) + spatial_bias[rel_b(i, j), h]
//
// rel_b is the pairwise relation of example b (Positions.Rel, per example
// or shared). The table has NumRel rows, fixed at construction: the
// positions must have at most NumRel relations (graphdata's
// NumSpatialRelations(maxDist) = maxDist+2, one more with WithVirtualNode).
//
// Conventions, compared with microsoft/Graphormer (graphormer_layers.py
// GraphAttnBias, data/collator.py):
//
//   - Sharing: Graphormer computes the attention bias once
//     (GraphormerGraphEncoder.forward: attn_bias = self.graph_attn_bias(...))
//     and passes the same bias to every layer. By default (PerLayer false)
//     this encoding does the same: one table "spatial_bias" [NumRel, H]
//     shared by every layer. With PerLayer each layer has its own
//     "<prefix>/spatial_bias".
//   - Indices: Graphormer's spatial_pos_encoder is an nn.Embedding indexed
//     by distance+1 with row 0 the padding row (padding_idx=0: zero, no
//     gradient). Here row r is relation r (distance r); padding pairs get
//     the unreachable relation instead of a padding row, and padding keys
//     must be masked by the model (their bias then gets no gradient).
//     Graphormer's table minus its padding row is this table.
//   - Far and unreachable pairs: Graphormer masks pairs at distance >=
//     spatial_pos_max (20; unreachable pairs are at distance 510) with
//     -inf in attn_bias; here, as issue #14 asks, distances >= maxDist share
//     the last distance row and unreachable pairs have their own learnable
//     row (graphdata does the clipping).
//   - Virtual token: Graphormer adds one learnable scalar per head
//     (graph_token_virtual_distance) to row 0 and column 0 of the bias, the
//     graph token's (once at [0, 0]). Positions from WithVirtualNode give
//     every pair with token 0 one extra relation, so row NumRel-1 of the
//     table plays that role: the same bias.
//   - Init: N(0, InitStd²); Graphormer initialises its nn.Embedding tables
//     N(0, 0.02²) (init_params), the default InitStd.
//   - Alpha (Options.Alpha; not Graphormer's): "spatial_alpha" [1]
//     ("<prefix>/spatial_alpha" with PerLayer, AlphaName), init AlphaInit,
//     not weight-decayed, multiplies the table.
//
// Edge-feature encodings (Graphormer's edge_encoder) are not part of this
// encoding. GraphormerSpatial is a TableBiaser with per-example indices
// (BiasIndex returns perExample = true when the positions have Batch > 1);
// ScoreBias is TileBias over Site.Full, [B|1, H, TQ, TK]. Causal attention
// gets the same bias (the mask hides the future keys). It accepts pairwise
// positions only; one value may build graphs from several goroutines.
type GraphormerSpatial struct {
	// NumRel is the number of rows of the table.
	NumRel int
	// InitStd is the init standard deviation of the table.
	InitStd float64
	// PerLayer gives every layer its own table "<prefix>/spatial_bias";
	// false shares "spatial_bias" across layers, as Graphormer.
	PerLayer bool
	// Alpha scales the table by the learnable AlphaName (Options.Alpha).
	Alpha bool
}

// NewGraphormerSpatial returns the spatial encoding with a table of numRel
// rows. It returns an error if numRel < 1 or initStd < 0.
func NewGraphormerSpatial(numRel int, initStd float64, perLayer bool) (*GraphormerSpatial, error) {
	if numRel < 1 {
		return nil, errors.Errorf("posenc graphormer-spatial: %d relations: need at least 1", numRel)
	}
	if initStd < 0 {
		return nil, errors.Errorf("posenc graphormer-spatial: init std %g is negative", initStd)
	}
	return &GraphormerSpatial{NumRel: numRel, InitStd: initStd, PerLayer: perLayer}, nil
}

// Name implements Encoding.
func (*GraphormerSpatial) Name() string { return "graphormer-spatial" }

// Accepts implements PositionAccepter: pairwise positions.
func (*GraphormerSpatial) Accepts() []PosKind { return []PosKind{PosPairwise} }

// TableName is the parameter name of the site's table: "spatial_bias", or
// "<prefix>/spatial_bias" with PerLayer.
func (e *GraphormerSpatial) TableName(s *Site) string {
	if e.PerLayer {
		return s.Prefix + "/spatial_bias"
	}
	return "spatial_bias"
}

// AlphaName is the parameter name of the site's scale of Alpha:
// "spatial_alpha", or "<prefix>/spatial_alpha" with PerLayer.
func (e *GraphormerSpatial) AlphaName(s *Site) string {
	if e.PerLayer {
		return s.Prefix + "/spatial_alpha"
	}
	return "spatial_alpha"
}

// BiasTable implements TableBiaser: the table [NumRel, H] (TableName),
// N(0, InitStd²), not weight-decayed; times AlphaName with Alpha.
func (e *GraphormerSpatial) BiasTable(s *Site) (*G.Node, error) {
	if e.NumRel < 1 {
		return nil, errors.Errorf("posenc graphormer-spatial: %d relations: need at least 1", e.NumRel)
	}
	if s.H <= 0 {
		return nil, errors.Errorf("posenc graphormer-spatial: %d heads", s.H)
	}
	t, err := s.Params.Node(s.G, e.TableName(s), tensor.Shape{e.NumRel, s.H}, graph.Normal(e.InitStd), false)
	if err != nil {
		return nil, errors.Wrap(err, "posenc graphormer-spatial")
	}
	t, err = withAlpha(s, t, e.Alpha, e.AlphaName(s))
	return t, errors.Wrap(err, "posenc graphormer-spatial")
}

// checkPairwise returns an error (prefixed with what) unless p holds
// pairwise positions with a positive batch and sizes and batch*tq*tk
// relations (a hand-built Positions value may not).
func checkPairwise(what string, p *Positions) error {
	if p == nil || p.Kind != PosPairwise {
		return errors.Errorf("%s: needs pairwise positions (graph relations), got %s positions", what, p.Describe())
	}
	if p.Batch < 1 || p.TQ < 1 || p.TK < 1 || len(p.Rel) != p.Batch*p.TQ*p.TK {
		return errors.Errorf("%s: pairwise positions have %d relations for batch %d, %d queries and %d keys; want batch*tq*tk, all positive",
			what, len(p.Rel), p.Batch, p.TQ, p.TK)
	}
	return nil
}

// pairwiseSite returns the site's positions if they are pairwise and fit
// the site, else an error naming enc.
func pairwiseSite(enc string, s *Site) (*Positions, error) {
	p := s.Pos
	if err := checkPairwise("posenc "+enc, p); err != nil {
		return nil, err
	}
	if err := p.Check(max(s.B, 1), s.TQ, s.TK); err != nil {
		return nil, errors.Wrap(err, "posenc "+enc)
	}
	return p, nil
}

// BiasIndex implements TableBiaser: dst[(i-Q0)*(K1-K0) + j-K0] =
// rel_b(i, j) for the pairs of tile t. perExample is true when the
// positions are per example (Batch > 1; b selects the example), false when
// they are shared (b is ignored). It returns an error naming the encoding
// for positions other than pairwise ones fitting the site, b outside the
// batch, more relations than table rows, or a relation outside the table.
func (e *GraphormerSpatial) BiasIndex(s *Site, b int, t Tile, dst []int) (bool, error) {
	p, err := pairwiseSite(e.Name(), s)
	if err != nil {
		return false, err
	}
	if err := CheckTile(s, t); err != nil {
		return false, err
	}
	if p.NumRel > e.NumRel {
		return false, errors.Errorf("posenc graphormer-spatial: positions have %d relations, the table %d rows (graphdata: NumSpatialRelations(maxDist) = maxDist+2, one more with a virtual node)",
			p.NumRel, e.NumRel)
	}
	tk := t.K1 - t.K0
	if len(dst) != (t.Q1-t.Q0)*tk {
		return false, errors.Errorf("posenc graphormer-spatial: BiasIndex: dst has %d entries, the tile %d", len(dst), (t.Q1-t.Q0)*tk)
	}
	if p.Batch == 1 {
		b = 0
	} else if b < 0 || b >= p.Batch {
		return false, errors.Errorf("posenc graphormer-spatial: example %d is outside the batch of %d", b, p.Batch)
	}
	for i := t.Q0; i < t.Q1; i++ {
		row := p.Rel[(b*p.TQ+i)*p.TK:]
		for j := t.K0; j < t.K1; j++ {
			r := row[j]
			if r < 0 || r >= e.NumRel {
				return false, errors.Errorf("posenc graphormer-spatial: relation %d of example %d, pair (%d, %d) is outside the table's %d rows", r, b, i, j, e.NumRel)
			}
			dst[(i-t.Q0)*tk+j-t.K0] = r
		}
	}
	return p.Batch > 1, nil
}

// ScoreBias implements ScoreBiaser: bias [Batch, H, TQ, TK] (Batch of the
// positions: B per example, 1 shared), bias[b, h, i, j] =
// table[rel_b(i, j), h], TileBias over Site.Full. Errors as BiasIndex.
func (e *GraphormerSpatial) ScoreBias(s *Site) (*G.Node, error) { return TileBias(e, s, s.Full()) }

// WithVirtualNode returns p with a virtual (graph) token prepended, as
// Graphormer's graph token: token 0 of the new positions is the virtual
// node, tokens 1..TQ (1..TK) are p's, and every pair involving token 0 (in
// either role, and with itself) has the new relation p.NumRel, so the
// result has NumRel+1 relations (graphdata's VirtualRelation(maxDist) =
// maxDist+2 = NumSpatialRelations(maxDist)). It returns an error unless p
// holds pairwise positions.
func WithVirtualNode(p *Positions) (*Positions, error) {
	if err := checkPairwise("posenc: virtual node", p); err != nil {
		return nil, err
	}
	tq, tk, v := p.TQ+1, p.TK+1, p.NumRel
	rel := make([]int, p.Batch*tq*tk)
	for b := 0; b < p.Batch; b++ {
		for i := 0; i < tq; i++ {
			out := rel[(b*tq+i)*tk : (b*tq+i+1)*tk]
			if i == 0 {
				for j := range out {
					out[j] = v
				}
				continue
			}
			out[0] = v
			copy(out[1:], p.Rel[(b*p.TQ+i-1)*p.TK:(b*p.TQ+i)*p.TK])
		}
	}
	return NewPairwise(p.Batch, tq, tk, v+1, rel)
}

// GraphormerCentrality is Graphormer's centrality encoding (Ying et al.
// 2021): a learnable embedding of each node's degree added to its input,
//
//	x'[b, i, :] = x[b, i, :] + centrality_emb[min(deg_b(i), MaxDegree), :]
//
// Parameter "centrality_emb" [MaxDegree+1, d], shared by the model, init
// N(0, InitStd²) (Graphormer: nn.Embedding, N(0, 0.02²)), not
// weight-decayed.
//
// The degrees come from the positions (GraphDegrees): deg_b(i) is the
// number of keys j with rel_b(i, j) == GraphAdjacentRelation (1), which
// assumes Graphormer spatial relations (distance buckets with 0 = the node
// itself and 1 = adjacent, maxDist >= 1, as graphdata builds them) and
// self-attention positions (TQ == TK, query i and key i the same node).
// Padding nodes (relation unreachable to everything) get degree 0, the row
// of an isolated node; so does a virtual token (WithVirtualNode). The model
// must mask padding nodes as keys and leave them out of its loss and
// pooling: then their inputs never reach a real node's output and row 0
// gets no gradient from them. A virtual token's row-0 embedding is a
// constant shift that its own learnable embedding absorbs.
//
// Differences from microsoft/Graphormer (GraphNodeFeature, collator.py):
// Graphormer has an in-degree and an out-degree embedding, indexed by
// degree+1 with row 0 for padding (padding_idx=0), and for undirected
// graphs passes the same degrees to both (collator: out_degree=in_degree),
// so the two lookups always add up to one lookup into their sum; this
// encoding has that one table (its init variance is InitStd², not twice
// it). Graphormer does not clip (its tables have 512 rows); here degrees
// above MaxDegree share the last row. Padding gets row 0 as said.
//
// It implements InputAdder and accepts pairwise positions only; the
// degrees of a Positions value (Positions.Key) are computed once and
// cached, and one value may build graphs from several goroutines.
type GraphormerCentrality struct {
	// MaxDegree is the largest degree with its own row.
	MaxDegree int
	// InitStd is the init standard deviation of the table.
	InitStd float64

	deg tableCache[centralityKey, []int]
}

type centralityKey struct {
	pos string
	max int
}

// NewGraphormerCentrality returns the centrality encoding with rows for
// degrees 0..maxDegree. It returns an error if maxDegree < 1 or initStd <
// 0.
func NewGraphormerCentrality(maxDegree int, initStd float64) (*GraphormerCentrality, error) {
	if maxDegree < 1 {
		return nil, errors.Errorf("posenc graphormer-centrality: maximum degree %d must be at least 1", maxDegree)
	}
	if initStd < 0 {
		return nil, errors.Errorf("posenc graphormer-centrality: init std %g is negative", initStd)
	}
	return &GraphormerCentrality{MaxDegree: maxDegree, InitStd: initStd}, nil
}

// Name implements Encoding.
func (*GraphormerCentrality) Name() string { return "graphormer-centrality" }

// Accepts implements PositionAccepter: pairwise positions.
func (*GraphormerCentrality) Accepts() []PosKind { return []PosKind{PosPairwise} }

// GraphDegrees returns the degree of every query node of pairwise
// positions p [Batch*TQ], row-major [Batch, TQ]: the number of keys j
// with relation GraphAdjacentRelation (see GraphormerCentrality), clipped
// to maxDegree if maxDegree > 0. It returns an error unless p holds
// self-attention pairwise positions (TQ == TK) with at least 2 relations.
func GraphDegrees(p *Positions, maxDegree int) ([]int, error) {
	if err := checkPairwise("posenc: graph degrees", p); err != nil {
		return nil, err
	}
	if p.TQ != p.TK {
		return nil, errors.Errorf("posenc: graph degrees: pairwise positions have %d queries and %d keys; degrees need self-attention over the nodes", p.TQ, p.TK)
	}
	if p.NumRel <= GraphAdjacentRelation {
		return nil, errors.Errorf("posenc: graph degrees: %d relations cannot hold the adjacent relation %d (Graphormer spatial relations: maxDist+2 of them)", p.NumRel, GraphAdjacentRelation)
	}
	deg := make([]int, p.Batch*p.TQ)
	for r, row := range deg {
		for _, v := range p.Rel[r*p.TK : (r+1)*p.TK] {
			if v == GraphAdjacentRelation {
				row++
			}
		}
		if maxDegree > 0 {
			row = min(row, maxDegree)
		}
		deg[r] = row
	}
	return deg, nil
}

// AddToInput implements InputAdder: x [B, N, d] plus the degree embedding
// of every node (see GraphormerCentrality), the site's positions giving the
// degrees of N nodes for each example (Batch B) or for all (Batch 1).
// Errors name the encoding: x not [B, N, DModel], positions other than
// pairwise self-attention positions of N nodes (GraphDegrees), or a batch
// other than B or 1.
func (e *GraphormerCentrality) AddToInput(s *Site, x *G.Node) (*G.Node, error) {
	const name = "posenc graphormer-centrality"
	if e.MaxDegree < 1 {
		return nil, errors.Errorf("%s: maximum degree %d must be at least 1", name, e.MaxDegree)
	}
	sh := x.Shape()
	if sh.Dims() != 3 || (s.DModel > 0 && sh[2] != s.DModel) {
		return nil, errors.Errorf("%s: input has shape %v, want [B, N, %d]", name, sh, s.DModel)
	}
	bs, n, d := sh[0], sh[1], sh[2]
	p := s.Pos
	if err := checkPairwise(name, p); err != nil {
		return nil, err
	}
	if p.TQ != n || p.TK != n {
		return nil, errors.Errorf("%s: pairwise positions have %d query and %d key positions, the input has %d nodes", name, p.TQ, p.TK, n)
	}
	if p.Batch != 1 && p.Batch != bs {
		return nil, errors.Errorf("%s: positions are for a batch of %d, the input has %d examples", name, p.Batch, bs)
	}
	tab, err := s.Params.Node(s.G, "centrality_emb", tensor.Shape{e.MaxDegree + 1, d}, graph.Normal(e.InitStd), false)
	if err != nil {
		return nil, errors.Wrap(err, name)
	}
	var ids *G.Node
	if p.Feed != nil {
		if ids, err = fedDegrees(e, s, p); err != nil { // Int [Batch, N], rebindable
			return nil, errors.Wrap(err, name)
		}
	} else {
		deg, err := e.deg.get(centralityKey{p.Key(), e.MaxDegree}, func() ([]int, error) { return GraphDegrees(p, e.MaxDegree) })
		if err != nil {
			return nil, errors.Wrap(err, name)
		}
		ids = G.NewTensor(s.G, tensor.Int, 2, G.WithShape(p.Batch, n), G.WithName(graph.UniqueName(s.G, "centrality_ids")),
			G.WithValue(tensor.New(tensor.WithShape(p.Batch, n), tensor.WithBacking(slices.Clone(deg)))))
	}
	emb, err := graph.Embedding(tab, ids) // [Batch, N, d]
	if err != nil {
		return nil, errors.Wrap(err, name)
	}
	return graph.BroadcastAdd(x, emb)
}

// LaplacianInput adds Laplacian-eigenvector positions to node inputs, the
// absolute graph positions of Dwivedi & Bresson 2020 ("A Generalization of
// Transformer Networks to Graphs", AAAI workshop DLG-21) and Dwivedi et al.
// 2020 ("Benchmarking Graph Neural Networks": embedding_lap_pos_enc, an
// nn.Linear(k, d) whose output is added to the node embeddings):
//
//	x'[b, i, :] = x[b, i, :] + lapPE[b, i, :] · W + bias
//
// x is [B, N, d], lapPE [B, N, K] (graphdata.Batch.LapPE: the K
// eigenvectors of the normalised Laplacian after the first, zero for
// padding nodes). Parameters: name+"/w" [K, d], init N(0, initStd²), and
// name+"/b" [d], init 0, neither weight-decayed (name is usually
// "lap_proj"). Dwivedi et al. keep PyTorch's default nn.Linear init
// (uniform ±1/√K); Graphormer-style N(0, std²) with a zero bias is used
// here to match the other position tables. The random sign flips of
// training (Dwivedi & Bresson: each eigenvector's sign flipped with
// probability 1/2 per graph and step) happen on the host before lapPE is
// fed (graphdata.BatchOptions.Flip); evaluation feeds unflipped vectors.
// Padding nodes get the bias alone; the model must mask them as keys.
//
// The eigenvectors are real-valued per-node features, which Positions do
// not carry, so this is a function on a given node rather than an
// InputAdder: the caller feeds lapPE as an input node of the graph's dtype
// (rebindable per batch with G.Let). It returns an error if name is empty,
// initStd < 0, or the shapes disagree (naming both).
func LaplacianInput(g *G.ExprGraph, p *graph.Params, name string, x, lapPE *G.Node, initStd float64) (*G.Node, error) {
	if name == "" {
		return nil, errors.New("posenc laplacian: empty parameter name")
	}
	if initStd < 0 {
		return nil, errors.Errorf("posenc laplacian: init std %g is negative", initStd)
	}
	xs, ls := x.Shape(), lapPE.Shape()
	if xs.Dims() != 3 || ls.Dims() != 3 || xs[0] != ls[0] || xs[1] != ls[1] || ls[2] < 1 {
		return nil, errors.Errorf("posenc laplacian: input %v and Laplacian encoding %v, want [B, N, d] and [B, N, K] with K >= 1", xs, ls)
	}
	w, err := p.Node(g, name+"/w", tensor.Shape{ls[2], xs[2]}, graph.Normal(initStd), false)
	if err != nil {
		return nil, errors.Wrap(err, "posenc laplacian")
	}
	bias, err := p.Node(g, name+"/b", tensor.Shape{xs[2]}, graph.Constant(0), false)
	if err != nil {
		return nil, errors.Wrap(err, "posenc laplacian")
	}
	proj, err := graph.Linear(lapPE, w, bias) // [B, N, d]
	if err != nil {
		return nil, errors.Wrap(err, "posenc laplacian")
	}
	return graph.BroadcastAdd(x, proj)
}
