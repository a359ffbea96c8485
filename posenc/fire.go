package posenc

import (
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

func init() {
	register(Info{Name: "fire", Kind: KindRelative, Learnable: true}, func(o Options) (Encoding, error) {
		e, err := NewFIRE(o.FireWidth, o.FireInitC, o.FireInitL)
		if err != nil {
			return nil, err
		}
		e.Alpha = o.Alpha
		return e, nil
	})
}

// FireEps is added to FIRE's normaliser ψ(max(L, i)) so that it is never
// zero (the eps of the paper's pseudo-code).
const FireEps = 1e-6

// FIRE is the functional interpolation for relative positions of Li et al.
// 2023 ("Functional Interpolation for Relative Positions Improves Long
// Context Transformers", ICLR 2024): a score bias per head computed by a
// small MLP from the relative distance normalised by the query position:
//
//	ψ(x)          = log(|c| x + 1)
//	L             = |l_mult · InitL|
//	bias[h, i, j] = f_θ( ψ(|p_i - k_j|) / (ψ(max(L, p_i)) + FireEps) )[h]
//	f_θ(x)        = ReLU(x W_1 + b_1) W_2 + b_2       (1 → Width → H)
//
// with p_i = QStart+i the absolute position of query i and k_j = KStart+j
// that of key j. This is the paper's appendix pseudo-code: c starts at
// init_c = 0.1 and is kept positive by the absolute value, the threshold L
// is init_L = 512 (a constant) times a learnable multiplier starting at 1,
// again under an absolute value, and the MLP has mlp_width = 32 and ReLU.
// The paper defines the bias for causal attention, i >= j; for keys after
// the query (bidirectional attention, or the masked future keys of causal
// attention) the pseudo-code's |c·(i - j)| gives the same bias as at
// distance |i - j|, and this is what FIRE computes. max(L, p) is computed
// as p + ReLU(L - p); at the tie L = p Gorgonia's ReLU has slope 1, so the
// whole gradient goes to L (PyTorch's torch.max splits it in halves; the
// tie needs l_mult·InitL to be an integer position, as at init with the
// defaults, L = 512).
//
// Unlike dpb, the MLP input depends on the query position as well as on
// the distance, so the MLP runs once per forward pass on the R distinct
// (|p - k|, p) pairs of the span (R <= TQ·TK; about 3/4·T² for a T×T
// self-attention), a [R, 1] input computed in the graph from host
// distances and positions, and the bias [H, TQ, TK] is gathered from its
// [R, H] output with host indices (graph.GatherRel).
//
// Parameters, shared by all layers (one bias for the model, like t5 and
// dpb): "fire_c" [1] (init InitC), "fire_l_mult" [1] (init 1), and the
// MLP's "fire_w0" [1, Width], "fire_b0" [Width], "fire_w1" [Width, H],
// "fire_b1" [H], initialised as PyTorch's nn.Linear; with Alpha
// (Options.Alpha), "fire_alpha" [1], init AlphaInit, multiplying the MLP's
// output, the whole bias (line and real positions alike). None is
// weight-decayed.
//
// FIRE is a TableBiaser (the table is the MLP's output on the span's
// pairs). The bias node of a (graph, parameter store, span, H) is built
// once and returned to every layer; the pairs of a span are computed once
// on the host. One FIRE value may build graphs from several
// goroutines at once. With layers' Stream, FIRE is a StreamAttender:
// StreamAttend evaluates the MLP per tile inside graph.StreamAttention
// (graph.FIREBias), so the streaming attention holds no table of R ~ T²
// rows; BiasTable and BiasIndex remain for the materialised tiles.
//
// Real positions (PosReal, NewReal): the same formula with the query's
// time t_q[i] for p_i and Δ = |t_k[j] - t_q[i]| for the distance,
//
//	bias[b, h, i, j] = f_θ( ψ(Δ) / (ψ(max(L, t_q[i])) + FireEps) )[h],
//
// [B, H, TQ, TK] for per-example times, [H, TQ, TK] for shared ones. The
// MLP then runs on every (example, query, key) pair: Batch·TQ·TK rows
// (e.g. 16·128·128 = 262144 rows of Width hidden units per forward pass,
// and as many in the backward pass), not the distinct pairs of a span; its
// inputs (Δ, t_q and -t_q per pair) are constants cached per positions
// Key, or with a Feed input nodes refilled by Feed.Bind. Query times must
// be >= 0 (the paper's positions are): a negative query time is an error
// naming it (shift the times to start at 0), as ψ(max(L, t_q)) would no
// longer depend on the query for L = 0. FIRE is not translation-invariant:
// shifting every time changes the normaliser. The causal mask is by index;
// no order of the times is needed. Integer times 0..T-1 give the line
// path's bias (to rounding). BiasTable and BiasIndex refuse real sites.
type FIRE struct {
	Width        int
	InitC, InitL float64
	// Alpha scales the bias by the learnable "fire_alpha"
	// (Options.Alpha).
	Alpha bool

	nodes, tables graphNodes[relNodeKey]
	plans         tableCache[Span, firePlan]

	rcache tableCache[realKey, *tensor.Dense]
	rnodes graphNodes[realNodeKey]
}

// NewFIRE returns FIRE with an MLP of hidden width width, c initialised to
// initC and threshold initL. It returns an error naming the value unless
// width >= 1, initC >= 0 and initL >= 0 (all finite).
func NewFIRE(width int, initC, initL float64) (*FIRE, error) {
	if err := fireCheck(width, initC, initL); err != nil {
		return nil, err
	}
	return &FIRE{Width: width, InitC: initC, InitL: initL}, nil
}

func fireCheck(width int, initC, initL float64) error {
	if width < 1 {
		return errors.Errorf("posenc fire: MLP width %d must be at least 1", width)
	}
	if !(initC >= 0) || math.IsInf(initC, 0) {
		return errors.Errorf("posenc fire: initial c %g must be finite and non-negative", initC)
	}
	if !(initL >= 0) || math.IsInf(initL, 0) {
		return errors.Errorf("posenc fire: initial threshold L %g must be finite and non-negative", initL)
	}
	return nil
}

// Name implements Encoding.
func (*FIRE) Name() string { return "fire" }

// firePairs returns the distinct (distance, query position) pairs of span
// s in first-seen order (row-major over the queries and keys), and the row
// of every (i, j) pair, row-major [TQ, TK].
func firePairs(s Span) (dist, qpos []float64, rows []int) {
	type pair struct{ d, p int }
	seen := map[pair]int{}
	rows = make([]int, s.TQ*s.TK)
	for i := 0; i < s.TQ; i++ {
		p := s.QStart + i
		for j := 0; j < s.TK; j++ {
			d := p - s.KStart - j
			if d < 0 {
				d = -d
			}
			k, ok := seen[pair{d, p}]
			if !ok {
				k = len(dist)
				seen[pair{d, p}] = k
				dist = append(dist, float64(d))
				qpos = append(qpos, float64(p))
			}
			rows[i*s.TK+j] = k
		}
	}
	return dist, qpos, rows
}

// firePlan is the host side of a span: the distinct (distance, query
// position) pairs and the row of every (i, j) pair (see firePairs).
type firePlan struct {
	dist, qpos []float64
	rows       []int
}

func (e *FIRE) plan(s Span) firePlan {
	p, _ := e.plans.get(s, func() (firePlan, error) {
		d, q, r := firePairs(s)
		return firePlan{d, q, r}, nil
	})
	return p
}

// checkSite returns an error unless the site has heads and a non-empty
// span and the settings are valid.
func (e *FIRE) checkSite(s *Site) error {
	if err := checkBiasSite("fire", s); err != nil {
		return err
	}
	return fireCheck(e.Width, e.InitC, e.InitL)
}

// Accepts implements PositionAccepter: line and real positions.
func (*FIRE) Accepts() []PosKind { return []PosKind{PosLine, PosReal} }

// ScoreBias implements ScoreBiaser: bias [H, TQ, TK] as the type's
// formula, or of real positions [B, H, TQ, TK] per example and
// [H, TQ, TK] shared. It returns an error if the site has no heads or an
// empty span, the settings are invalid, or a real query time is negative.
func (e *FIRE) ScoreBias(s *Site) (*G.Node, error) {
	if s.Kind() != PosReal {
		return tableScoreBias(e, &e.nodes, s)
	}
	if err := e.checkSite(s); err != nil {
		return nil, err
	}
	return realScoreBias("fire", &e.rnodes, s, e.realBias)
}

// realBias is the bias of real positions (see FIRE).
func (e *FIRE) realBias(s *Site) (*G.Node, error) {
	pos := s.Pos
	checked := func(p *Positions) error {
		for i, t := range p.QTimes {
			if t < 0 {
				return errors.Errorf("posenc fire: query %d of example %d is at time %g: FIRE needs query times >= 0 (shift the times to start at 0)", i%p.TQ, i/p.TQ, t)
			}
		}
		return nil
	}
	if err := checked(pos); err != nil {
		return nil, err
	}
	n := pos.Batch * pos.TQ * pos.TK
	shape := tensor.Shape{n}
	input := func(what, name string, f func(tq, tk float64) float64, check bool) (*G.Node, error) {
		return realInput(s, &e.rcache, e, "fire "+what+" of real positions", name, shape, func(p *Positions, dst []float64) error {
			if check {
				if err := checked(p); err != nil {
					return err
				}
			}
			realPairs(p, dst, f)
			return nil
		})
	}
	dist, err := input("distances", "fire_dist", func(tq, tk float64) float64 { return math.Abs(tk - tq) }, true)
	if err != nil {
		return nil, err
	}
	qpos, err := input("query times", "fire_qpos", func(tq, _ float64) float64 { return tq }, false)
	if err != nil {
		return nil, err
	}
	negq, err := input("negated query times", "fire_neg_qpos", func(tq, _ float64) float64 { return -tq }, false)
	if err != nil {
		return nil, err
	}
	table, err := e.mlp(s, dist, qpos, negq, n)
	if err != nil {
		return nil, err
	}
	return realPairBias(table, pos, s.H)
}

// BiasTable implements TableBiaser: the MLP's output [R, H] (times
// fire_alpha with Alpha) on the R distinct (distance, query position) pairs
// of the span. Calls for the
// same graph, parameter store, span and H return the same node.
func (e *FIRE) BiasTable(s *Site) (*G.Node, error) {
	if err := e.checkSite(s); err != nil {
		return nil, err
	}
	if s.Kind() == PosReal {
		return nil, errRealTiles("fire")
	}
	return e.tables.get(s.G, relNodeKey{s.Span, s.H, s.Params}, func() (*G.Node, error) {
		table, err := e.build(s)
		return table, errors.Wrap(err, "posenc fire")
	})
}

// BiasIndex implements TableBiaser: the row of BiasTable of every pair of
// tile t, shared by the batch.
func (e *FIRE) BiasIndex(s *Site, _ int, t Tile, dst []int) (bool, error) {
	if err := CheckTile(s, t); err != nil {
		return false, err
	}
	if s.Kind() == PosReal {
		return false, errRealTiles("fire")
	}
	rows := e.plan(s.Span).rows
	tk := t.K1 - t.K0
	for i := t.Q0; i < t.Q1; i++ {
		copy(dst[(i-t.Q0)*tk:(i-t.Q0+1)*tk], rows[i*s.TK+t.K0:i*s.TK+t.K1])
	}
	return false, nil
}

// build returns the MLP's output [R, H] on the span's pairs.
func (e *FIRE) build(s *Site) (*G.Node, error) {
	pl := e.plan(s.Span)
	dist, qpos := pl.dist, pl.qpos
	r := len(dist)
	dt := s.Dtype()
	host := func(name string, v []float64) *G.Node {
		return G.NewTensor(s.G, dt, 1, G.WithShape(len(v)), G.WithName(graph.UniqueName(s.G, name)),
			G.WithValue(graph.FromFloat64s(dt, tensor.Shape{len(v)}, v)))
	}
	negq := make([]float64, r)
	for k, p := range qpos {
		negq[k] = -p
	}
	return e.mlp(s, host("fire_dist", dist), host("fire_qpos", qpos), host("fire_neg_qpos", negq), r)
}

// mlp returns the MLP's output [r, H] (times fire_alpha with Alpha) on the r pairs of distances dist,
// query positions qpos and their negations negq [r].
func (e *FIRE) mlp(s *Site, dist, qpos, negq *G.Node, r int) (*G.Node, error) {
	dt := s.Dtype()
	host := func(name string, v []float64) *G.Node {
		return G.NewTensor(s.G, dt, 1, G.WithShape(len(v)), G.WithName(graph.UniqueName(s.G, name)),
			G.WithValue(graph.FromFloat64s(dt, tensor.Shape{len(v)}, v)))
	}
	c, lm, err := e.scalars(s)
	if err != nil {
		return nil, err
	}
	absC, err := G.Abs(c)
	if err != nil {
		return nil, err
	}
	// L = |l_mult| · InitL (InitL >= 0).
	absL, err := G.Abs(lm)
	if err != nil {
		return nil, err
	}
	thr, err := graph.BroadcastMul(absL, host("fire_init_l", []float64{e.InitL}))
	if err != nil {
		return nil, err
	}
	// ψ(d) = log1p(|c| d), d >= 0.
	num, err := graph.BroadcastMul(dist, absC)
	if err != nil {
		return nil, err
	}
	if num, err = G.Log1p(num); err != nil {
		return nil, err
	}
	// max(L, p) = p + ReLU(L - p).
	lp, err := graph.BroadcastAdd(negq, thr)
	if err != nil {
		return nil, err
	}
	if lp, err = G.Rectify(lp); err != nil {
		return nil, err
	}
	mx, err := G.Add(qpos, lp)
	if err != nil {
		return nil, err
	}
	// ψ(max(L, p)) + eps; max(L, p) >= 0 for positions >= 0.
	den, err := graph.BroadcastMul(mx, absC)
	if err != nil {
		return nil, err
	}
	if den, err = G.Log1p(den); err != nil {
		return nil, err
	}
	if den, err = graph.BroadcastAdd(den, host("fire_eps", []float64{FireEps})); err != nil {
		return nil, err
	}
	x, err := G.HadamardDiv(num, den)
	if err != nil {
		return nil, err
	}
	if x, err = graph.Reshape(x, r, 1); err != nil {
		return nil, err
	}
	m := biasMLP{name: "fire", widths: []int{1, e.Width, s.H}, act: relu}
	if x, err = m.apply(s, x); err != nil {
		return nil, err
	}
	return withAlpha(s, x, e.Alpha, "fire_alpha")
}

// StreamAttend implements StreamAttender: graph.StreamAttention with FIRE's
// bias computed per tile by the op (graph.FIREBias, the same parameter
// nodes as ScoreBias), so that no [R, H] table over the span's
// (distance, query position) pairs, R ~ 3/4·T², is built: the work space is
// O(TileQ·TileK·(Width+H)) per thread. The result equals the materialised
// attention with ScoreBias up to rounding (float64 accumulation of the
// MLP). o's QStart and KStart are set from the site. It returns an error
// naming fire for a site of real positions (their bias is per example and
// pair), a site the settings refuse, or o with a table, terms or FIRE's
// bias already.
func (e *FIRE) StreamAttend(s *Site, q, k, v *G.Node, o graph.StreamOpts) (*G.Node, error) {
	if err := e.checkSite(s); err != nil {
		return nil, err
	}
	if s.Kind() == PosReal {
		return nil, errRealTiles("fire")
	}
	if o.Table != nil || o.Index != nil || len(o.Terms) > 0 || o.FIRE != nil {
		return nil, errors.New("posenc fire: stream: the options already hold a table bias, terms or FIRE's bias")
	}
	fb, err := e.streamBias(s)
	if err != nil {
		return nil, errors.Wrap(err, "posenc fire")
	}
	o.FIRE, o.QStart, o.KStart = fb, s.QStart, s.KStart
	out, err := graph.StreamAttention(q, k, v, o)
	return out, errors.WithMessage(err, "posenc fire")
}

// streamBias returns the parameter nodes of site s for graph.FIREBias.
func (e *FIRE) streamBias(s *Site) (*graph.FIREBias, error) {
	c, lm, err := e.scalars(s)
	if err != nil {
		return nil, err
	}
	fb := &graph.FIREBias{C: c, LMult: lm, InitL: e.InitL, Eps: FireEps}
	m := biasMLP{name: "fire", widths: []int{1, e.Width, s.H}, act: relu}
	if fb.W0, fb.B0, err = m.layer(s, 0); err != nil {
		return nil, err
	}
	if fb.W1, fb.B1, err = m.layer(s, 1); err != nil {
		return nil, err
	}
	if e.Alpha {
		if fb.Alpha, err = s.Params.Node(s.G, "fire_alpha", tensor.Shape{1}, graph.Constant(AlphaInit), false); err != nil {
			return nil, err
		}
	}
	return fb, nil
}

// scalars returns the parameters "fire_c" and "fire_l_mult" [1] of site s.
func (e *FIRE) scalars(s *Site) (c, lm *G.Node, err error) {
	if c, err = s.Params.Node(s.G, "fire_c", tensor.Shape{1}, graph.Constant(e.InitC), false); err != nil {
		return nil, nil, err
	}
	lm, err = s.Params.Node(s.G, "fire_l_mult", tensor.Shape{1}, graph.Ones, false)
	return c, lm, err
}
