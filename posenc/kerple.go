package posenc

import (
	"math"
	"math/rand"
	"sync"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

// The kernels of Kerple.
const (
	KerpleLog   = "log"   // -r1·log(1 + r2·|m-n|)
	KerplePower = "power" // -r1·|m-n|^r2
)

// KerplePowerMax is the largest exponent r2 of the power kernel: the
// conditionally positive definite power kernels -|m-n|^p have p in (0, 2].
const KerplePowerMax = 2.0

func init() {
	register(Info{Name: "kerple-log", Kind: KindRelative, Learnable: true}, func(o Options) (Encoding, error) {
		e, err := NewKerple(KerpleLog, o.KerpleEps)
		if err != nil {
			return nil, err
		}
		e.Alpha = o.Alpha
		return e, nil
	})
	register(Info{Name: "kerple-power", Kind: KindRelative, Learnable: true}, func(o Options) (Encoding, error) {
		e, err := NewKerple(KerplePower, o.KerpleEps)
		if err != nil {
			return nil, err
		}
		e.Alpha = o.Alpha
		return e, nil
	})
}

// Kerple is the kernelized relative position bias of Chi, Fan, Ramadge and
// Rudnicky 2022 ("KERPLE: Kernelized Relative Positional Embedding for
// Length Extrapolation", NeurIPS 2022): a content-free bias added to the
// scaled scores, one of two conditionally positive definite kernels of the
// distance with two learnable positive parameters per head:
//
//	kerple-log:    bias[h, i, j] = -r1_h · log(1 + r2_h · |kpos_j - qpos_i|)
//	kerple-power:  bias[h, i, j] = -r1_h · |kpos_j - qpos_i|^r2_h
//
// with qpos_i = s.QStart+i, kpos_j = s.KStart+j, in causal and
// bidirectional attention alike (the paper is causal; its code computes the
// distance of the lower triangle, the upper one being masked; here the
// distance is |rel| everywhere, so cross and memory spans work, and future
// keys are hidden by the causal mask).
//
// Parameters, as the paper's code (github.com/chijames/KERPLE,
// megatron/mpu/layers.py: ParallelKerpleLog, ParallelKerplePower; one
// module built in gpt2_model.py and handed to every layer): one pair per
// head shared by all layers, never weight-decayed:
//
//	kerple-log:    "kerple_log_r1" [H] init U(0, 2) (the code's bias_p),
//	               "kerple_log_r2" [H] init U(0, 1) (bias_a)
//	kerple-power:  "kerple_power_r1" [H] init U(0, 1) (bias_a),
//	               "kerple_power_r2" [H] init U(0, 2) (bias_p, the exponent)
//
// Positivity: the paper's code clamps the stored values in place before
// every forward pass, r1, r2 >= eps = 0.01 and the exponent r2 <= 2
// (Eps, default Options.KerpleEps = 0.01). A graph cannot write its
// parameters, so the bias uses the clamped values clamp(r) = max(r, Eps)
// (and min(·, 2) for the exponent) computed in the graph: the same bias,
// and the same gradient while a value is inside its range. The one
// difference: a value that an update takes outside its range keeps its
// stored value and gets no gradient (it stays at the bound until nothing
// else moves it), where the paper's projection would reset it to the bound
// and let the next gradient move it back. Parameters start in range except
// for draws below Eps (probability Eps/2 or Eps per head).
//
// With Alpha (Options.Alpha), also "kerple_log_alpha" or
// "kerple_power_alpha" [1] (AlphaName), init AlphaInit, shared like r1 and
// r2, not weight-decayed, multiplying the whole bias (line and real
// positions alike).
//
// The bias is built as a table over the distinct distances of the span
// ([R, H], R <= TQ+TK-1, from the clamped parameters with Gorgonia's Mul,
// Log, Exp and Rectify and graph.BroadcastMul) and gathered to [H, TQ, TK]
// (graph.GatherRel), so the gradient of every (i, j) reaches r1 and r2.
// Calls for the same graph, parameter store, span and H return the same
// node. One Kerple may build graphs from several goroutines at once (each
// with its own graph.Params).
//
// Real positions (PosReal, NewReal): the kernels of Δ = |t_k[j] - t_q[i]|,
//
//	kerple-log:    bias[b, h, i, j] = -r1_h · log(1 + r2_h · Δ)
//	kerple-power:  bias[b, h, i, j] = -r1_h · Δ^r2_h
//
// [B, H, TQ, TK] for per-example times, [H, TQ, TK] for shared ones. The
// table then has one row per (example, query, key) pair (Batch·TQ·TK rows
// of H kernel values, the same ops as the line path's table), gathered to
// the bias; the host data (Δ, or log Δ and the zero-distance mask of the
// power kernel) is a constant cached per positions Key, or with a Feed
// input nodes refilled by Feed.Bind. The causal mask is by index; the
// kernel needs no order of the times. Integer times 0..T-1 give the line
// path's bias exactly.
//
// Kerple is a TableBiaser on line positions (BiasTable is the table above,
// BiasIndex maps each pair to its distance's row), not on real positions.
type Kerple struct {
	// Kernel is KerpleLog or KerplePower.
	Kernel string
	// Eps is the lower bound of the parameters (the paper's 0.01).
	Eps float64
	// Alpha scales the bias by the learnable AlphaName (Options.Alpha).
	Alpha bool

	idx tableCache[kerpleIdxKey, kerpleIdx]

	mu    sync.Mutex
	lastG *G.ExprGraph
	nodes map[kerpleNodeKey]*G.Node

	rcache tableCache[realKey, *tensor.Dense]
	rnodes graphNodes[realNodeKey]
	tables graphNodes[relNodeKey] // BiasTable nodes
}

type kerpleIdxKey struct {
	span Span
	h    int
}

type kerpleNodeKey struct {
	kerpleIdxKey
	p *graph.Params
}

// kerpleIdx is the distance table of a span: distances dmin..dmin+R-1 and
// the flat indices (headTableIndex) of the [R, H] table.
type kerpleIdx struct {
	dmin, r int
	flat    []int
}

// NewKerple returns the KERPLE bias with kernel KerpleLog or KerplePower
// and lower bound eps of its parameters. It returns an error naming the
// encoding for another kernel or for eps outside (0, 1).
func NewKerple(kernel string, eps float64) (*Kerple, error) {
	e := &Kerple{Kernel: kernel, Eps: eps}
	if err := e.check(); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *Kerple) check() error {
	if e.Kernel != KerpleLog && e.Kernel != KerplePower {
		return errors.Errorf("posenc kerple: kernel %q, want %q or %q", e.Kernel, KerpleLog, KerplePower)
	}
	if !(e.Eps > 0 && e.Eps < 1) {
		return errors.Errorf("posenc %s: eps %g (the lower bound of r1 and r2) must be in (0, 1)", e.Name(), e.Eps)
	}
	return nil
}

// Name implements Encoding: "kerple-log" or "kerple-power".
func (e *Kerple) Name() string { return "kerple-" + e.Kernel }

// ParamNames returns the names of r1 and r2: "kerple_log_r1",
// "kerple_log_r2" or "kerple_power_r1", "kerple_power_r2".
func (e *Kerple) ParamNames() (r1, r2 string) {
	p := "kerple_" + e.Kernel
	return p + "_r1", p + "_r2"
}

// AlphaName returns the name of the bias scale of Alpha:
// "kerple_log_alpha" or "kerple_power_alpha".
func (e *Kerple) AlphaName() string { return "kerple_" + e.Kernel + "_alpha" }

// uniform0 returns an Init drawing from U(0, hi), torch.rand(n)*hi.
func uniform0(hi float64) graph.Init {
	return func(rng *rand.Rand, data []float64) {
		for i := range data {
			data[i] = rng.Float64() * hi
		}
	}
}

// inits returns the initialisers of r1 and r2 (see Kerple).
func (e *Kerple) inits() (r1, r2 graph.Init) {
	if e.Kernel == KerpleLog {
		return uniform0(2), uniform0(1)
	}
	return uniform0(1), uniform0(KerplePowerMax)
}

// KerpleClamp returns the value of a parameter that the bias uses: max(r,
// eps), and at most KerplePowerMax for the exponent of the power kernel
// (exponent true).
func KerpleClamp(r, eps float64, exponent bool) float64 {
	r = math.Max(r, eps)
	if exponent {
		r = math.Min(r, KerplePowerMax)
	}
	return r
}

// KerpleBias returns the bias [H, len(qpos), len(kpos)] (row-major) of
// kernel KerpleLog or KerplePower with per-head parameters r1, r2 [H]
// (clamped with KerpleClamp and eps as the encoding does) of queries at
// qpos and keys at kpos. It returns nil for another kernel or when r1 and
// r2 differ in length.
func KerpleBias(kernel string, r1, r2 []float64, eps float64, qpos, kpos []int) []float64 {
	if (kernel != KerpleLog && kernel != KerplePower) || len(r1) != len(r2) {
		return nil
	}
	tq, tk := len(qpos), len(kpos)
	out := make([]float64, len(r1)*tq*tk)
	for h := range r1 {
		a := KerpleClamp(r1[h], eps, false)
		b := KerpleClamp(r2[h], eps, kernel == KerplePower)
		for i, qp := range qpos {
			for j, kp := range kpos {
				d := float64(absInt(kp - qp))
				if d == 0 {
					continue // 0 for both kernels (no -0)
				}
				if kernel == KerpleLog {
					out[(h*tq+i)*tk+j] = -a * math.Log1p(b*d)
				} else {
					out[(h*tq+i)*tk+j] = -a * math.Pow(d, b)
				}
			}
		}
	}
	return out
}

// distances returns the distance table of the span (see kerpleIdx).
func kerpleDistances(s Span, h int) kerpleIdx {
	dmin, dmax := -1, 0
	for i := 0; i < s.TQ; i++ {
		for j := 0; j < s.TK; j++ {
			d := int(absInt(s.Rel(i, j)))
			if dmin < 0 || d < dmin {
				dmin = d
			}
			dmax = max(dmax, d)
		}
	}
	rel := make([]int, s.TQ*s.TK)
	for i := 0; i < s.TQ; i++ {
		for j := 0; j < s.TK; j++ {
			rel[i*s.TK+j] = int(absInt(s.Rel(i, j))) - dmin
		}
	}
	return kerpleIdx{dmin: dmin, r: dmax - dmin + 1, flat: headTableIndex(rel, h, s.TQ, s.TK)}
}

// clampNode returns max(r, eps) (and min(·, hi) if hi > 0) of r [1, H] as
// eps + relu(r - eps) and hi - relu(hi - ·): gradient 1 inside the range,
// 0 outside.
func clampNode(g *G.ExprGraph, r *G.Node, eps, hi float64) (*G.Node, error) {
	dt := r.Dtype()
	x, err := G.Sub(r, graph.Scalar(g, dt, eps))
	if err != nil {
		return nil, err
	}
	if x, err = G.Rectify(x); err != nil {
		return nil, err
	}
	if x, err = G.Add(x, graph.Scalar(g, dt, eps)); err != nil {
		return nil, err
	}
	if hi <= 0 {
		return x, nil
	}
	if x, err = G.Sub(graph.Scalar(g, dt, hi), x); err != nil {
		return nil, err
	}
	if x, err = G.Rectify(x); err != nil {
		return nil, err
	}
	return G.Sub(graph.Scalar(g, dt, hi), x)
}

// hostColumn returns a constant input node [n, 1] of g holding v.
func hostColumn(g *G.ExprGraph, dt tensor.Dtype, name string, v []float64) *G.Node {
	return G.NewTensor(g, dt, 2, G.WithShape(len(v), 1), G.WithName(graph.UniqueName(g, name)),
		G.WithValue(graph.FromFloat64s(dt, tensor.Shape{len(v), 1}, v)))
}

// Params returns the nodes of r1 and r2 [H] in s's graph, creating them
// (see Kerple for names and initialisation) on first use.
func (e *Kerple) Params(s *Site) (r1, r2 *G.Node, err error) {
	n1, n2 := e.ParamNames()
	i1, i2 := e.inits()
	if r1, err = s.Params.Node(s.G, n1, tensor.Shape{s.H}, i1, false); err != nil {
		return nil, nil, errors.Wrapf(err, "posenc %s", e.Name())
	}
	if r2, err = s.Params.Node(s.G, n2, tensor.Shape{s.H}, i2, false); err != nil {
		return nil, nil, errors.Wrapf(err, "posenc %s", e.Name())
	}
	return r1, r2, nil
}

// table returns the bias table [R, H] of the distances dmin..dmin+R-1.
func (e *Kerple) table(s *Site, dmin, r int) (*G.Node, error) {
	r1, r2, err := e.clamped(s)
	if err != nil {
		return nil, err
	}
	dt := s.Dtype()
	col, sign := kerpleColumns(e.Kernel, dmin, r)
	return e.kernel(s, hostColumn(s.G, dt, "kerple_d", col), hostColumn(s.G, dt, "kerple_sign", sign), r1, r2, r)
}

// clamped returns the clamped parameters r1, r2 [1, H] (see Kerple).
func (e *Kerple) clamped(s *Site) (r1, r2 *G.Node, err error) {
	if r1, r2, err = e.Params(s); err != nil {
		return nil, nil, err
	}
	if r1, err = graph.Reshape(r1, 1, s.H); err != nil {
		return nil, nil, err
	}
	if r2, err = graph.Reshape(r2, 1, s.H); err != nil {
		return nil, nil, err
	}
	if r1, err = clampNode(s.G, r1, e.Eps, 0); err != nil {
		return nil, nil, err
	}
	hi := 0.0
	if e.Kernel == KerplePower {
		hi = KerplePowerMax
	}
	r2, err = clampNode(s.G, r2, e.Eps, hi)
	return r1, r2, err
}

// kerpleColumns returns the host columns of the distances dmin..dmin+r-1:
// col (log: d; power: log d, 0 at d = 0) and sign (-1; power: 0 at d = 0).
func kerpleColumns(kernel string, dmin, r int) (col, sign []float64) {
	col = make([]float64, r)
	sign = make([]float64, r)
	for k := range col {
		col[k], sign[k] = kerpleColumn(kernel, float64(dmin+k))
	}
	return col, sign
}

// kerpleColumn returns the entries of the columns of distance d (see
// kerpleColumns).
func kerpleColumn(kernel string, d float64) (col, sign float64) {
	switch {
	case kernel == KerpleLog:
		return d, -1
	case d > 0:
		return math.Log(d), -1
	}
	return 0, 0 // 0^r2 = 0 for r2 > 0
}

// kernel returns the table [R, H] of the kernel from the host columns
// colN and signN [R, 1] and the clamped parameters r1, r2 [1, H].
func (e *Kerple) kernel(s *Site, colN, signN, r1, r2 *G.Node, r int) (*G.Node, error) {
	dt := s.Dtype()
	x, err := G.Mul(colN, r2) // [R, 1]·[1, H]
	if err != nil {
		return nil, err
	}
	if e.Kernel == KerpleLog {
		one := make([]float64, r*s.H)
		for k := range one {
			one[k] = 1
		}
		ones := G.NewTensor(s.G, dt, 2, G.WithShape(r, s.H), G.WithName(graph.UniqueName(s.G, "kerple_ones")),
			G.WithValue(graph.FromFloat64s(dt, tensor.Shape{r, s.H}, one)))
		if x, err = G.Add(x, ones); err != nil {
			return nil, err
		}
		if x, err = G.Log(x); err != nil {
			return nil, err
		}
	} else if x, err = G.Exp(x); err != nil {
		return nil, err
	}
	if x, err = graph.BroadcastMul(x, r1); err != nil {
		return nil, err
	}
	if x, err = graph.BroadcastMul(x, signN); err != nil {
		return nil, err
	}
	return withAlpha(s, x, e.Alpha, e.AlphaName())
}

// kerpleRange returns the smallest distance |key - query| of the span and
// the number of distances up to the largest, the dmin and r of
// kerpleDistances, in O(1).
func kerpleRange(s Span) (dmin, r int) {
	lo, hi := s.Rel(s.TQ-1, 0), s.Rel(0, s.TK-1)
	amin, amax := absInt(lo), absInt(hi)
	if amin > amax {
		amin, amax = amax, amin
	}
	if lo <= 0 && hi >= 0 {
		amin = 0
	}
	return int(amin), int(amax-amin) + 1
}

// BiasTable implements TableBiaser on line positions: the table [R, H] of
// the kernel at the span's distances |key - query| = dmin..dmin+R-1 (times
// the alpha of Alpha), the table ScoreBias gathers from. Calls for the same
// graph, parameter store, span and H return the same node. An error for
// real positions (their distances are continuous and per example) or an
// empty site.
func (e *Kerple) BiasTable(s *Site) (*G.Node, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	if err := checkBiasSite(e.Name(), s); err != nil {
		return nil, err
	}
	if s.Kind() == PosReal {
		return nil, errRealTiles(e.Name())
	}
	return e.tables.get(s.G, relNodeKey{s.Span, s.H, s.Params}, func() (*G.Node, error) {
		dmin, r := kerpleRange(s.Span)
		table, err := e.table(s, dmin, r)
		return table, errors.Wrapf(err, "posenc %s", e.Name())
	})
}

// BiasIndex implements TableBiaser: the row |key - query| - dmin of
// BiasTable for every pair of tile t, shared by the batch. An error for
// real positions.
func (e *Kerple) BiasIndex(s *Site, _ int, t Tile, dst []int) (bool, error) {
	if s.Kind() == PosReal {
		return false, errRealTiles(e.Name())
	}
	if err := CheckTile(s, t); err != nil {
		return false, err
	}
	tk := t.K1 - t.K0
	if len(dst) != (t.Q1-t.Q0)*tk {
		return false, errors.Errorf("posenc %s: BiasIndex: dst has %d entries, the tile %d", e.Name(), len(dst), (t.Q1-t.Q0)*tk)
	}
	dmin, _ := kerpleRange(s.Span)
	for i := t.Q0; i < t.Q1; i++ {
		for j := t.K0; j < t.K1; j++ {
			dst[(i-t.Q0)*tk+j-t.K0] = int(absInt(s.Rel(i, j))) - dmin
		}
	}
	return false, nil
}

// Accepts implements PositionAccepter: line and real positions.
func (*Kerple) Accepts() []PosKind { return []PosKind{PosLine, PosReal} }

// realBias is the bias of real positions (see Kerple).
func (e *Kerple) realBias(s *Site) (*G.Node, error) {
	r1, r2, err := e.clamped(s)
	if err != nil {
		return nil, err
	}
	kernel := e.Kernel
	col, err := realPairInput(s, &e.rcache, e, e.Name()+" distance column of real positions", "kerple_d", true, func(tq, tk float64) float64 {
		c, _ := kerpleColumn(kernel, math.Abs(tk-tq))
		return c
	})
	if err != nil {
		return nil, err
	}
	sign, err := realPairInput(s, &e.rcache, e, e.Name()+" sign column of real positions", "kerple_sign", true, func(tq, tk float64) float64 {
		_, sg := kerpleColumn(kernel, math.Abs(tk-tq))
		return sg
	})
	if err != nil {
		return nil, err
	}
	table, err := e.kernel(s, col, sign, r1, r2, s.Pos.Batch*s.TQ*s.TK)
	if err != nil {
		return nil, err
	}
	return realPairBias(table, s.Pos, s.H)
}

// ScoreBias implements ScoreBiaser: the bias [H, TQ, TK] of the site's span,
// or of real positions [B, H, TQ, TK] per example and [H, TQ, TK] shared
// (see Kerple). It returns an error naming the encoding if the site has no
// heads or an empty span.
func (e *Kerple) ScoreBias(s *Site) (*G.Node, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	if s.H <= 0 || s.TQ <= 0 || s.TK <= 0 {
		return nil, errors.Errorf("posenc %s: H = %d, TQ = %d and TK = %d must be positive", e.Name(), s.H, s.TQ, s.TK)
	}
	if s.Kind() == PosReal {
		return realScoreBias(e.Name(), &e.rnodes, s, e.realBias)
	}
	ik := kerpleIdxKey{span: s.Span, h: s.H}
	nk := kerpleNodeKey{kerpleIdxKey: ik, p: s.Params}
	e.mu.Lock()
	defer e.mu.Unlock()
	if s.G != e.lastG {
		e.lastG, e.nodes = s.G, map[kerpleNodeKey]*G.Node{}
	}
	if n, ok := e.nodes[nk]; ok {
		return n, nil
	}
	idx, _ := e.idx.get(ik, func() (kerpleIdx, error) { return kerpleDistances(s.Span, s.H), nil })
	table, err := e.table(s, idx.dmin, idx.r)
	if err != nil {
		return nil, errors.Wrapf(err, "posenc %s", e.Name())
	}
	bias, err := headTableBias(table, idx.flat, s.H, s.TQ, s.TK)
	if err != nil {
		return nil, errors.Wrapf(err, "posenc %s: bias [%d, %d, %d]", e.Name(), s.H, s.TQ, s.TK)
	}
	e.nodes[nk] = bias
	return bias, nil
}
