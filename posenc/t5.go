package posenc

import (
	"math"
	"sync"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

func init() {
	register(Info{Name: "t5", Kind: KindRelative, Learnable: true}, func(o Options) (Encoding, error) {
		return NewT5(o.T5Buckets, o.T5MaxDistance, o.InitStd, o.Alpha)
	})
}

// T5Bucket is the bucket of relative position rel = key position - query
// position in the T5 bias (Raffel et al. 2020; Hugging Face's
// T5Attention._relative_position_bucket):
//
//	bidirectional: nb = numBuckets/2, offset = nb if rel > 0 else 0, n = |rel|
//	causal:        nb = numBuckets,   offset = 0,                   n = max(-rel, 0)
//	me = nb/2 (integer division)
//	bucket = offset + n                                               if n < me
//	       = offset + min(me + trunc(ln(n/me) / ln(maxDistance/me) * (nb - me)), nb - 1)  otherwise
//
// So the me nearest distances get their own bucket and the rest share
// logarithmically wider buckets up to maxDistance, beyond which everything
// falls in the last one. In causal mode all future keys (rel > 0) share
// bucket 0 with rel = 0 (they are masked anyway). The result is in
// [0, numBuckets) for every int rel, math.MinInt included (|rel| is taken
// without overflow; distances at or beyond maxDistance give the last bucket
// directly): bidirectionally in [0, nb) for rel <= 0 and in [nb, 2nb) for
// rel > 0, with T5Bucket(d) = T5Bucket(-d) + nb for d > 0; in both modes the
// bucket is non-decreasing in the distance n. The logarithm is taken in
// float64 (HF uses float32, which can differ only when the quotient is
// within float32 rounding of an integer).
//
// T5Bucket panics unless the buckets are well defined: me >= 1 (numBuckets >=
// 4 bidirectional, >= 2 causal) and maxDistance > me.
func T5Bucket(rel int, bidirectional bool, numBuckets, maxDistance int) int {
	nb, offset := numBuckets, 0
	var n uint64 // the distance, |rel| or max(-rel, 0), without overflow at math.MinInt
	if bidirectional {
		nb /= 2
		if rel > 0 {
			offset = nb
		}
		n = absInt(rel)
	} else if rel < 0 {
		n = absInt(rel)
	}
	me := nb / 2
	if me < 1 || maxDistance <= me {
		panic(errors.Errorf("posenc: T5Bucket: %d buckets (bidirectional %v) and max distance %d: need %d exact buckets >= 1 and max distance > %d",
			numBuckets, bidirectional, maxDistance, me, me))
	}
	if n < uint64(me) {
		return offset + int(n)
	}
	if n >= uint64(maxDistance) { // the log ratio is >= 1: the last bucket
		return offset + nb - 1
	}
	large := me + int(math.Log(float64(n)/float64(me))/math.Log(float64(maxDistance)/float64(me))*float64(nb-me))
	return offset + min(large, nb-1)
}

// T5 is the relative position bias of T5 (Raffel et al. 2020, "Exploring the
// Limits of Transfer Learning with a Unified Text-to-Text Transformer",
// JMLR 21(140)): a learned scalar per head and per bucket of the relative
// distance, added to the scaled attention scores before the mask:
//
//	scores[b, h, i, j] = q_i·k_j / sqrt(dh) + t5_bias[T5Bucket(kpos_j - qpos_i), h]
//
// (T5 itself does not scale q·k; this library's attention does, and the bias
// is added unscaled.) The buckets are bidirectional when the attention is not
// causal (Site.Causal false) and causal otherwise, as T5Bucket defines.
//
// Parameters: one table "t5_bias" [NumBuckets, H], N(0, InitStd²), shared by
// all layers; with Alpha, also "t5_alpha" [1], init AlphaInit, multiplying
// the table. Neither is weight-decayed.
//
// The bias [H, Tq, Tk] of a (graph, span) is built once and the same node is
// returned to every layer of that forward pass (the encoding caches the nodes
// of the most recent graph; were a bias rebuilt, Gorgonia would merge it with
// the existing identical node anyway). The bucket indices are computed on the
// host once per (span, causal, H) and enter the graph as an attribute of a
// graph.GatherRel node. The zero value with NumBuckets and MaxDistance set
// is ready to use, and one T5 value may build graphs from several goroutines
// at once (each with its own graph.Params: a Params is not safe for
// concurrent use).
type T5 struct {
	NumBuckets, MaxDistance int
	InitStd                 float64
	Alpha                   bool

	idx tableCache[t5IdxKey, []int] // flat table indices (see headTableIndex)

	mu    sync.Mutex   // guards lastG and nodes
	lastG *G.ExprGraph // the graph the node cache belongs to
	nodes map[t5NodeKey]*G.Node
}

type t5IdxKey struct {
	span                    Span
	causal                  bool
	h                       int
	numBuckets, maxDistance int
}

type t5NodeKey struct {
	t5IdxKey
	p *graph.Params
}

// NewT5 returns the T5 bias with numBuckets buckets, log buckets up to
// maxDistance, tables initialised N(0, initStd²) and, if alpha, a learnable
// scale. It returns an error if the buckets are not well defined in both
// modes (numBuckets >= 4, maxDistance > numBuckets/2) or initStd < 0.
func NewT5(numBuckets, maxDistance int, initStd float64, alpha bool) (*T5, error) {
	if err := t5Check(numBuckets, maxDistance); err != nil {
		return nil, err
	}
	if initStd < 0 {
		return nil, errors.Errorf("posenc t5: init std %g is negative", initStd)
	}
	return &T5{NumBuckets: numBuckets, MaxDistance: maxDistance, InitStd: initStd, Alpha: alpha}, nil
}

func t5Check(numBuckets, maxDistance int) error {
	if numBuckets < 4 || maxDistance <= numBuckets/2 {
		return errors.Errorf("posenc t5: %d buckets and max distance %d: need at least 4 buckets and max distance > buckets/2 = %d", numBuckets, maxDistance, numBuckets/2)
	}
	return nil
}

// Name implements Encoding.
func (*T5) Name() string { return "t5" }

// ScoreBias implements ScoreBiaser: bias [H, TQ, TK] with bias[h, i, j] =
// (alpha *) t5_bias[T5Bucket(s.Rel(i, j), !s.Causal, NumBuckets, MaxDistance), h].
// Calls for the same graph, parameter store, span, causality and H return
// the same node.
func (e *T5) ScoreBias(s *Site) (*G.Node, error) {
	if s.H <= 0 || s.TQ <= 0 || s.TK <= 0 {
		return nil, errors.Errorf("posenc t5: H = %d, TQ = %d and TK = %d must be positive", s.H, s.TQ, s.TK)
	}
	if err := t5Check(e.NumBuckets, e.MaxDistance); err != nil {
		return nil, err
	}
	ik := t5IdxKey{span: s.Span, causal: s.Causal, h: s.H, numBuckets: e.NumBuckets, maxDistance: e.MaxDistance}
	nk := t5NodeKey{t5IdxKey: ik, p: s.Params}
	e.mu.Lock()
	defer e.mu.Unlock()
	if s.G != e.lastG {
		e.lastG, e.nodes = s.G, map[t5NodeKey]*G.Node{}
	}
	if n, ok := e.nodes[nk]; ok {
		return n, nil
	}
	flat, _ := e.idx.get(ik, func() ([]int, error) {
		b := make([]int, s.TQ*s.TK)
		for i := 0; i < s.TQ; i++ {
			for j := 0; j < s.TK; j++ {
				b[i*s.TK+j] = T5Bucket(s.Rel(i, j), !s.Causal, e.NumBuckets, e.MaxDistance)
			}
		}
		return headTableIndex(b, s.H, s.TQ, s.TK), nil
	})
	table, err := s.Params.Node(s.G, "t5_bias", tensor.Shape{e.NumBuckets, s.H}, graph.Normal(e.InitStd), false)
	if err != nil {
		return nil, errors.Wrap(err, "posenc t5")
	}
	if e.Alpha {
		if table, err = alphaScaled(s, table, "t5_alpha"); err != nil {
			return nil, errors.Wrap(err, "posenc t5")
		}
	}
	bias, err := headTableBias(table, flat, s.H, s.TQ, s.TK)
	if err != nil {
		return nil, errors.Wrapf(err, "posenc t5: bias [%d, %d, %d] from table %v", s.H, s.TQ, s.TK, table.Shape())
	}
	e.nodes[nk] = bias
	return bias, nil
}

// BiasTable implements TableBiaser: the table t5_bias [NumBuckets, H]
// (times t5_alpha with Alpha).
func (e *T5) BiasTable(s *Site) (*G.Node, error) {
	table, err := s.Params.Node(s.G, "t5_bias", tensor.Shape{e.NumBuckets, s.H}, graph.Normal(e.InitStd), false)
	if err != nil {
		return nil, errors.Wrap(err, "posenc t5")
	}
	if e.Alpha {
		return alphaScaled(s, table, "t5_alpha")
	}
	return table, nil
}

// BiasIndex implements TableBiaser: the bucket of every pair of tile t,
// shared by the batch.
func (e *T5) BiasIndex(s *Site, _ int, t Tile, dst []int) (bool, error) {
	if err := CheckTile(s, t); err != nil {
		return false, err
	}
	if err := t5Check(e.NumBuckets, e.MaxDistance); err != nil {
		return false, err
	}
	tk := t.K1 - t.K0
	for i := t.Q0; i < t.Q1; i++ {
		for j := t.K0; j < t.K1; j++ {
			dst[(i-t.Q0)*tk+j-t.K0] = T5Bucket(s.Rel(i, j), !s.Causal, e.NumBuckets, e.MaxDistance)
		}
	}
	return false, nil
}
