package posenc

import (
	"fmt"
	"math"
	"math/rand"
	"sync"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

func init() {
	register(Info{Name: "dpb", Kind: KindRelative, Learnable: true}, func(o Options) (Encoding, error) {
		e, err := NewDPB(o.DPBWidth, o.DPBDepth, o.DPBLogDistance, o.DPBNorm)
		if err != nil {
			return nil, err
		}
		e.Alpha = o.Alpha
		return e, nil
	})
}

// DPB is the dynamic position bias of CrossFormer (Wang et al. 2021,
// "CrossFormer: A Versatile Vision Transformer Hinging on Cross-scale
// Attention"), in its 1-D form of x-transformers' DynamicPositionBias
// (lucidrains/x-transformers): a small MLP maps the relative distance of
// a query and a key to one score bias per head, added to the scaled scores
// before the mask:
//
//	r = qpos_i - kpos_j                         (query minus key, as x-transformers)
//	x = sign(r) log(|r| + 1)  with LogDistance, else x = r
//	h_1 = SiLU(Norm(x W_1 + b_1))                [Width]
//	h_l = SiLU(Norm(h_{l-1} W_l + b_l))          l = 2..Depth, [Width]
//	bias[h, i, j] = (h_Depth W_out + b_out)[h]   [H]
//
// Norm is a LayerNorm (eps 1e-5, gain 1 and shift 0 at init) with Norm, the
// identity otherwise. Depth counts the hidden layers, as x-transformers'
// depth (Depth+1 linear maps in all).
//
// The MLP runs once per forward pass on the R = TQ+TK-1 distinct distances
// of the span (a [R, 1] host constant) and the bias [H, TQ, TK] is gathered
// from its [R, H] output with host indices (graph.GatherRel), so cross and
// memory spans (TQ != TK, offsets) work and the cost does not grow with
// TQ·TK. Causal and bidirectional attention use the same bias (future keys
// are masked in causal attention).
//
// Parameters, shared by all layers (x-transformers builds one
// DynamicPositionBias per stack of layers): "dpb_w<l>" [in, out] and
// "dpb_b<l>" [out] for l = 0..Depth (layer Depth is the output map to H),
// initialised as PyTorch's nn.Linear, U(-1/√in, 1/√in); with Norm,
// "dpb_ln<l>_g" and "dpb_ln<l>_b" [Width] for l = 0..Depth-1; with Alpha
// (Options.Alpha), "dpb_alpha" [1], init AlphaInit, multiplying the MLP's
// output, the whole bias (line and real positions alike). None is
// weight-decayed.
//
// DPB is a TableBiaser (the table is the MLP's output on the span's
// distances). The bias node of a (graph, parameter store, span, H) is
// built once and returned to every layer. One DPB value may build graphs from several
// goroutines at once.
//
// Real positions (PosReal, NewReal): the MLP of r = t_q[i] - t_k[j] (query
// minus key, as above; sign(r) log(|r| + 1) with LogDistance),
//
//	bias[b, h, i, j] = MLP(DPBInputReal(t_q[i] - t_k[j]))[h],
//
// [B, H, TQ, TK] for per-example times, [H, TQ, TK] for shared ones. The
// MLP then runs on every (example, query, key) pair: Batch·TQ·TK rows
// (e.g. 16·128·128 = 262144 rows of Width units per hidden layer, forward
// and backward), not the TQ+TK-1 distances of a span; its input [Batch·TQ·TK,
// 1] is a constant cached per positions Key, or with a Feed an input node
// refilled by Feed.Bind. The causal mask is by index; no order of the times
// is needed. Integer times 0..T-1 give the line path's bias (to rounding).
// BiasTable and BiasIndex refuse real sites.
type DPB struct {
	Width, Depth      int
	LogDistance, Norm bool
	// Alpha scales the bias by the learnable "dpb_alpha" (Options.Alpha).
	Alpha bool

	nodes, tables graphNodes[relNodeKey]

	rcache tableCache[realKey, *tensor.Dense]
	rnodes graphNodes[realNodeKey]
}

// relNodeKey identifies the bias node of a span for one graph.
type relNodeKey struct {
	span Span
	h    int
	p    *graph.Params
}

// NewDPB returns the dynamic position bias with Depth hidden layers of
// width Width. It returns an error naming the value unless width >= 1 and
// depth >= 1.
func NewDPB(width, depth int, logDistance, norm bool) (*DPB, error) {
	if err := dpbCheck(width, depth); err != nil {
		return nil, err
	}
	return &DPB{Width: width, Depth: depth, LogDistance: logDistance, Norm: norm}, nil
}

func dpbCheck(width, depth int) error {
	if width < 1 {
		return errors.Errorf("posenc dpb: MLP width %d must be at least 1", width)
	}
	if depth < 1 {
		return errors.Errorf("posenc dpb: MLP depth %d must be at least 1", depth)
	}
	return nil
}

// Name implements Encoding.
func (*DPB) Name() string { return "dpb" }

// DPBInput returns the MLP input of relative distance r = query - key
// position: sign(r) log(|r|+1) if logDistance, else r.
func DPBInput(r int, logDistance bool) float64 {
	x := float64(r)
	if logDistance {
		return math.Copysign(math.Log1p(math.Abs(x)), x)
	}
	return x
}

// DPBInputReal is DPBInput of a real difference r = query - key time.
func DPBInputReal(r float64, logDistance bool) float64 {
	if logDistance {
		return math.Copysign(math.Log1p(math.Abs(r)), r)
	}
	return r
}

// Accepts implements PositionAccepter: line and real positions.
func (*DPB) Accepts() []PosKind { return []PosKind{PosLine, PosReal} }

// realBias is the bias of real positions (see DPB).
func (e *DPB) realBias(s *Site) (*G.Node, error) {
	logd := e.LogDistance
	in, err := realPairInput(s, &e.rcache, e, fmt.Sprintf("dpb inputs of real positions (log %v)", logd), "dpb_in", true,
		func(tq, tk float64) float64 { return DPBInputReal(tq-tk, logd) })
	if err != nil {
		return nil, err
	}
	table, err := e.mlp(s, in)
	if err != nil {
		return nil, err
	}
	return realPairBias(table, s.Pos, s.H)
}

// checkSite returns an error unless the site has heads and a non-empty
// span and the widths are valid.
func (e *DPB) checkSite(s *Site) error {
	if err := checkBiasSite("dpb", s); err != nil {
		return err
	}
	return dpbCheck(e.Width, e.Depth)
}

// ScoreBias implements ScoreBiaser: bias [H, TQ, TK], bias[h, i, j] =
// MLP(DPBInput(qpos_i - kpos_j))[h], or of real positions [B, H, TQ, TK]
// per example and [H, TQ, TK] shared (see DPB). It returns an error if
// the site has no heads or an empty span, or the widths are invalid.
func (e *DPB) ScoreBias(s *Site) (*G.Node, error) {
	if s.Kind() != PosReal {
		return tableScoreBias(e, &e.nodes, s)
	}
	if err := e.checkSite(s); err != nil {
		return nil, err
	}
	return realScoreBias("dpb", &e.rnodes, s, e.realBias)
}

// BiasTable implements TableBiaser: the MLP's output [TQ+TK-1, H] (times
// dpb_alpha with Alpha) on the
// distinct distances of the span, row k for the distance
// r = QStart - (KStart+TK-1) + k (query minus key). Calls for the same
// graph, parameter store, span and H return the same node.
func (e *DPB) BiasTable(s *Site) (*G.Node, error) {
	if err := e.checkSite(s); err != nil {
		return nil, err
	}
	if s.Kind() == PosReal {
		return nil, errRealTiles("dpb")
	}
	return e.tables.get(s.G, relNodeKey{s.Span, s.H, s.Params}, func() (*G.Node, error) {
		rMin := s.QStart - (s.KStart + s.TK - 1)
		r := s.TQ + s.TK - 1
		x := make([]float64, r)
		for k := range x {
			x[k] = DPBInput(rMin+k, e.LogDistance)
		}
		in := G.NewTensor(s.G, s.Dtype(), 2, G.WithShape(r, 1), G.WithName(graph.UniqueName(s.G, "dpb_in")),
			G.WithValue(graph.FromFloat64s(s.Dtype(), tensor.Shape{r, 1}, x)))
		table, err := e.mlp(s, in)
		return table, errors.Wrap(err, "posenc dpb")
	})
}

// BiasIndex implements TableBiaser: the row TK-1 + i - j of BiasTable for
// the pair (i, j), shared by the batch.
func (e *DPB) BiasIndex(s *Site, _ int, t Tile, dst []int) (bool, error) {
	if err := CheckTile(s, t); err != nil {
		return false, err
	}
	if s.Kind() == PosReal {
		return false, errRealTiles("dpb")
	}
	tk := t.K1 - t.K0
	for i := t.Q0; i < t.Q1; i++ {
		for j := t.K0; j < t.K1; j++ {
			dst[(i-t.Q0)*tk+j-t.K0] = s.TK - 1 + i - j
		}
	}
	return false, nil
}

// mlp returns the MLP's output [R, H] on the inputs in [R, 1], times
// dpb_alpha with Alpha.
func (e *DPB) mlp(s *Site, in *G.Node) (*G.Node, error) {
	m := biasMLP{name: "dpb", widths: e.widths(s.H), act: silu, norm: e.Norm}
	table, err := m.apply(s, in)
	if err != nil {
		return nil, err
	}
	return withAlpha(s, table, e.Alpha, "dpb_alpha")
}

// widths returns the layer widths of the MLP: 1, Width × Depth, h.
func (e *DPB) widths(h int) []int {
	w := []int{1}
	for range e.Depth {
		w = append(w, e.Width)
	}
	return append(w, h)
}

// checkBiasSite returns an error naming enc unless the site has heads and
// a non-empty span.
func checkBiasSite(enc string, s *Site) error {
	if s.H <= 0 || s.TQ <= 0 || s.TK <= 0 {
		return errors.Errorf("posenc %s: H = %d, TQ = %d and TK = %d must be positive", enc, s.H, s.TQ, s.TK)
	}
	return nil
}

// tableScoreBias is the ScoreBias of a TableBiaser whose table has one
// column per head and whose rows are shared by the batch (dpb, fire): the
// bias [H, TQ, TK] gathered from BiasTable by BiasIndex over the full
// site, built once per (graph, parameter store, span, H) and cached in
// nodes. BiasTable checks the site.
func tableScoreBias(e TableBiaser, nodes *graphNodes[relNodeKey], s *Site) (*G.Node, error) {
	table, err := e.BiasTable(s)
	if err != nil {
		return nil, err
	}
	return nodes.get(s.G, relNodeKey{s.Span, s.H, s.Params}, func() (*G.Node, error) {
		rows := make([]int, s.TQ*s.TK)
		if _, err := e.BiasIndex(s, 0, s.Full(), rows); err != nil {
			return nil, err
		}
		bias, err := headTableBias(table, headTableIndex(rows, s.H, s.TQ, s.TK), s.H, s.TQ, s.TK)
		return bias, errors.Wrapf(err, "posenc %s", e.Name())
	})
}

// biasMLP is the small MLP of dpb and fire: linear maps between widths,
// each but the last followed by an optional LayerNorm and act. Its
// parameters, shared by all layers, are "<name>_w<l>" [widths[l],
// widths[l+1]] and "<name>_b<l>", U(-1/√in, 1/√in) as PyTorch's nn.Linear,
// and with norm "<name>_ln<l>_g" (ones) and "<name>_ln<l>_b" (zeros).
type biasMLP struct {
	name   string
	widths []int
	act    func(*G.Node) (*G.Node, error)
	norm   bool
}

// torchLinearInit is PyTorch's default nn.Linear init of a layer with in
// inputs: U(-1/√in, 1/√in) for the weight and the bias.
func torchLinearInit(in int) graph.Init {
	b := 1 / math.Sqrt(float64(in))
	return func(rng *rand.Rand, data []float64) {
		for i := range data {
			data[i] = (2*rng.Float64() - 1) * b
		}
	}
}

// layer returns the weight "<name>_w<l>" [in, out] and bias "<name>_b<l>"
// [out] of layer l, in = widths[l], out = widths[l+1].
func (m biasMLP) layer(s *Site, l int) (w, b *G.Node, err error) {
	in, out := m.widths[l], m.widths[l+1]
	if w, err = s.Params.Node(s.G, fmt.Sprintf("%s_w%d", m.name, l), tensor.Shape{in, out}, torchLinearInit(in), false); err != nil {
		return nil, nil, err
	}
	b, err = s.Params.Node(s.G, fmt.Sprintf("%s_b%d", m.name, l), tensor.Shape{out}, torchLinearInit(in), false)
	return w, b, err
}

// apply maps x [R, widths[0]] to [R, widths[last]].
func (m biasMLP) apply(s *Site, x *G.Node) (*G.Node, error) {
	for l := 0; l+1 < len(m.widths); l++ {
		out := m.widths[l+1]
		w, b, err := m.layer(s, l)
		if err != nil {
			return nil, err
		}
		if x, err = graph.Linear(x, w, b); err != nil {
			return nil, err
		}
		if l+2 == len(m.widths) {
			break
		}
		if m.norm {
			g, err := s.Params.Node(s.G, fmt.Sprintf("%s_ln%d_g", m.name, l), tensor.Shape{out}, graph.Ones, false)
			if err != nil {
				return nil, err
			}
			bb, err := s.Params.Node(s.G, fmt.Sprintf("%s_ln%d_b", m.name, l), tensor.Shape{out}, graph.Zeros, false)
			if err != nil {
				return nil, err
			}
			if x, err = graph.LayerNorm(x, g, bb, 1e-5); err != nil {
				return nil, err
			}
		}
		if x, err = m.act(x); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// silu is x·sigmoid(x) (SiLU, swish).
func silu(x *G.Node) (*G.Node, error) {
	sg, err := G.Sigmoid(x)
	if err != nil {
		return nil, err
	}
	return G.HadamardProd(x, sg)
}

// relu is max(x, 0).
func relu(x *G.Node) (*G.Node, error) { return G.Rectify(x) }

// graphNodes caches the nodes an encoding built in the most recent graph,
// so that every layer of a forward pass shares one bias node. Its zero
// value is ready to use; it must not be copied after first use.
type graphNodes[K comparable] struct {
	mu sync.Mutex
	g  *G.ExprGraph
	m  map[K]*G.Node
}

// get returns the node of key in graph g, building it (under the lock) if
// missing; a build error is not cached.
func (c *graphNodes[K]) get(g *G.ExprGraph, key K, build func() (*G.Node, error)) (*G.Node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g != c.g {
		c.g, c.m = g, map[K]*G.Node{}
	}
	if n, ok := c.m[key]; ok {
		return n, nil
	}
	n, err := build()
	if err != nil {
		return nil, err
	}
	c.m[key] = n
	return n, nil
}
