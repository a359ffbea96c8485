package posenc

// Helpers shared by the relative encodings (T5, Shaw, Transformer-XL,
// DeBERTa, ALiBi): shape checks, per-head tables, gather indices of a
// [R, H] bias table, the learnable bias scale.

import (
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

// AlphaInit is the initial value of the learnable scalar scale that
// Options.Alpha puts on the score contribution of every learnable relative
// encoding (the survey's "learnable scale α on the bias"). Each alpha is a
// [1] tensor, never weight-decayed, that multiplies the encoding's whole
// contribution to the scores: the bias of a ScoreBiaser, the terms of a
// ScoreTermer,
//
//	bias[h, i, j]     = alpha * table[index(i, j), h]
//	terms[b, h, i, j] = alpha * terms_without_alpha[b, h, i, j]
//
// Starting at 0.1 keeps the position signal small relative to the content
// scores early in training while letting the model grow it. The
// parameters, shared by the layers where the encoding's own parameters are
// and per layer (prefix = Site.Prefix) otherwise:
//
//	t5                  "t5_alpha"
//	shaw-scalar         "<prefix>/shaw_alpha"
//	shaw                "<prefix>/shaw_k_alpha"   (key terms only, not the value terms)
//	xl                  "<prefix>/xl_alpha"       (per layer like xl_wr, also with tied u, v)
//	deberta             "deberta_alpha"           (shared like deberta_rel)
//	kerple-log, -power  "kerple_log_alpha", "kerple_power_alpha"
//	fire, dpb           "fire_alpha", "dpb_alpha"
//	cope                "<prefix>/cope_alpha"
//	swin, swin-log      "<prefix>/swin_alpha", "<prefix>/swin_log_alpha"
//	tree                "<prefix>/tree_alpha"
//	graphormer-spatial  "spatial_alpha" ("<prefix>/spatial_alpha" with PerLayer)
//
// Encodings without learnable position parameters in the scores (alibi,
// sandwich, alibi-2d, the absolute and rotary encodings) ignore
// Options.Alpha; with Alpha off no encoding creates an alpha parameter and
// the outputs are those of a build without the option.
const AlphaInit = 0.1

// alphaScaled returns x * alpha, alpha being the learnable [1] parameter
// name initialised to AlphaInit (see AlphaInit); x is any float node of
// rank >= 1 (a bias table, score terms).
func alphaScaled(s *Site, x *G.Node, name string) (*G.Node, error) {
	a, err := s.Params.Node(s.G, name, tensor.Shape{1}, graph.Constant(AlphaInit), false)
	if err != nil {
		return nil, err
	}
	return graph.BroadcastMul(x, a)
}

// withAlpha returns alphaScaled(s, x, name) if on, else x itself (the same
// node: a build without Alpha is unchanged).
func withAlpha(s *Site, x *G.Node, on bool, name string) (*G.Node, error) {
	if !on {
		return x, nil
	}
	return alphaScaled(s, x, name)
}

// headTableIndex turns a relative index matrix rel (row-major [Tq, Tk],
// entries rows of a table [R, H]) into the flat indices of GatherRel on the
// table seen as [1, R*H] that produce bias [H, Tq, Tk]:
//
//	flat[(h*Tq + i)*Tk + j] = rel[i*Tk + j]*H + h
func headTableIndex(rel []int, h, tq, tk int) []int {
	flat := make([]int, h*tq*tk)
	for hh := 0; hh < h; hh++ {
		for k, r := range rel {
			flat[hh*tq*tk+k] = r*h + hh
		}
	}
	return flat
}

// headTableBias returns bias [H, Tq, Tk], bias[h, i, j] = table[rel(i, j), h],
// from table [R, H] and flat = headTableIndex(rel, H, Tq, Tk): a single
// gather (no transpose), whose gradient scatter-adds into the table.
func headTableBias(table *G.Node, flat []int, h, tq, tk int) (*G.Node, error) {
	ts := table.Shape()
	if len(ts) != 2 || ts[1] != h {
		return nil, errors.Errorf("table has shape %v, want [R, %d]", ts, h)
	}
	m, err := graph.Reshape(table, 1, ts[0]*h)
	if err != nil {
		return nil, err
	}
	out, err := graph.GatherRel(m, flat, 1, h*tq*tk) // [1, H*Tq*Tk]
	if err != nil {
		return nil, err
	}
	return graph.Reshape(out, h, tq, tk)
}

// checkQK checks q [B, H, TQ, dh] and k [B, H, TK, dh] against the site.
func checkQK(enc string, s *Site, q, k *G.Node) error {
	wq := tensor.Shape{s.B, s.H, s.TQ, s.DHead}
	wk := tensor.Shape{s.B, s.H, s.TK, s.DHead}
	if !q.Shape().Eq(wq) {
		return errors.Errorf("posenc %s: q has shape %v, want %v", enc, q.Shape(), wq)
	}
	if !k.Shape().Eq(wk) {
		return errors.Errorf("posenc %s: k has shape %v, want %v", enc, k.Shape(), wk)
	}
	if s.H*s.DHead != s.DModel {
		return errors.Errorf("posenc %s: %d heads of %d do not make d_model %d", enc, s.H, s.DHead, s.DModel)
	}
	return nil
}

// splitHeadTable splits a position table t [n, H*dh] into heads: [H, n, dh],
// head h taking columns h*dh:(h+1)*dh.
func splitHeadTable(t *G.Node, n, h, dh int) (*G.Node, error) {
	t, err := graph.Reshape(t, n, h, dh)
	if err != nil {
		return nil, err
	}
	return G.Transpose(t, 1, 0, 2)
}

// positions returns start, start+1, ..., start+n-1.
func positions(start, n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = start + i
	}
	return p
}

// absInt returns |x| as a uint64, exact for every int (|math.MinInt| = 2^63).
func absInt(x int) uint64 {
	if x < 0 {
		return -uint64(x)
	}
	return uint64(x)
}
