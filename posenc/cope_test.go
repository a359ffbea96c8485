package posenc_test

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/internal/fields"
	"github.com/rpe-go/rpe/layers"
	"github.com/rpe-go/rpe/posenc"
)

// refCoPETerms is cope's terms element by element from the paper's
// definition: p_ij = min(Σ_{k>=j, key k visible} σ(q_i·k_k/√dh), npos-1),
// o_ij = linear interpolation of z_i[n] = q_i·e[:, n] at p_ij, terms = √dh·o
// (o with divide).
func refCoPETerms(q, k, emb []float64, b, h, dh, npos int, span posenc.Span, divide bool) []float64 {
	tq, tk := span.TQ, span.TK
	out := make([]float64, b*h*tq*tk)
	for bh := 0; bh < b*h; bh++ {
		for i := 0; i < tq; i++ {
			qi := q[(bh*tq+i)*dh : (bh*tq+i+1)*dh]
			z := make([]float64, npos)
			for n := range z {
				for d := 0; d < dh; d++ {
					z[n] += qi[d] * emb[d*npos+n]
				}
			}
			for j := 0; j < tk; j++ {
				p := 0.0
				for kk := j; kk < tk; kk++ {
					if span.KStart+kk > span.QStart+i {
						continue
					}
					dot := 0.0
					for d := 0; d < dh; d++ {
						dot += qi[d] * k[(bh*tk+kk)*dh+d]
					}
					p += 1 / (1 + math.Exp(-dot/math.Sqrt(float64(dh))))
				}
				p = math.Min(p, float64(npos-1))
				lo := math.Floor(p)
				o := z[int(math.Ceil(p))]*(p-lo) + z[int(lo)]*(1-(p-lo))
				if !divide {
					o *= math.Sqrt(float64(dh))
				}
				out[(bh*tq+i)*tk+j] = o
			}
		}
	}
	return out
}

func randVecN(rng *rand.Rand, n int, std float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64() * std
	}
	return v
}

// TestCoPETerms compares the hook's terms with the element-by-element
// reference over spans (self, offset, memory with keys after some queries,
// a query past every key) and options (clamping npos, CopeDivide), with
// random q, k and table (seeded), and gradient-checks each in float64
// w.r.t. q, k and the table.
func TestCoPETerms(t *testing.T) {
	cases := []struct {
		name     string
		span     posenc.Span
		b, h, dh int
		o        posenc.Options
		scale    float64 // std of q and k: large saturates the gates
	}{
		{"self", posenc.Span{TQ: 5, TK: 5}, 2, 2, 4, posenc.Options{}, 1},
		{"offset self", posenc.Span{QStart: 7, TQ: 4, KStart: 7, TK: 4}, 1, 3, 2, posenc.Options{CopeNPos: 6}, 1},
		{"memory", posenc.Span{QStart: 6, TQ: 3, KStart: 2, TK: 7}, 2, 1, 4, posenc.Options{CopeNPos: 5}, 1},
		{"one query after the keys", posenc.Span{QStart: 9, TQ: 1, KStart: 3, TK: 4}, 1, 2, 4, posenc.Options{}, 1},
		{"clamped", posenc.Span{TQ: 8, TK: 8}, 1, 2, 4, posenc.Options{CopeNPos: 2}, 3},
		{"divide", posenc.Span{TQ: 4, TK: 4}, 1, 2, 8, posenc.Options{CopeNPos: 4, CopeDivide: true}, 1},
		{"one position", posenc.Span{TQ: 3, TK: 3}, 1, 1, 2, posenc.Options{CopeNPos: 1}, 1},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(100 + ci)))
			npos := c.o.Defaults().CopeNPos
			q := randVecN(rng, c.b*c.h*c.span.TQ*c.dh, c.scale)
			k := randVecN(rng, c.b*c.h*c.span.TK*c.dh, c.scale)
			emb := randVecN(rng, c.dh*npos, 1)
			w := randVecN(rng, c.b*c.h*c.span.TQ*c.span.TK, 1)
			g, terms, wrt := copeGraph(t, c.o, c.span, c.b, c.h, c.dh, q, k, emb)
			wn := G.NewTensor(g, tensor.Float64, 4, G.WithShape(terms.Shape()...), G.WithName("w"),
				G.WithValue(graph.FromFloat64s(tensor.Float64, terms.Shape(), w)))
			// graph.BroadcastMul: Gorgonia's HadamardProd would overwrite
			// terms in place in a forward-only run
			loss := G.Must(G.Sum(G.Must(graph.BroadcastMul(terms, wn))))
			m := G.NewTapeMachine(g)
			err := m.RunAll()
			m.Close()
			if err != nil {
				t.Fatal(err)
			}
			want := refCoPETerms(q, k, emb, c.b, c.h, c.dh, npos, c.span, c.o.CopeDivide)
			closeTo(t, c.name, graph.ToFloat64s(terms.Value()), want, 1e-12)
			if err := graph.GradCheck(g, loss, wrt, graph.GradCheckOpts{Seed: 3}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCoPEFloat32 builds the same terms in a float32 graph and compares
// them with the float64 ones.
func TestCoPEFloat32(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	span := posenc.Span{QStart: 3, TQ: 4, KStart: 1, TK: 6}
	const b, h, dh, npos = 2, 2, 4, 6
	q, k := randVecN(rng, b*h*span.TQ*dh, 1), randVecN(rng, b*h*span.TK*dh, 1)
	emb := randVecN(rng, dh*npos, 1)
	want := refCoPETerms(q, k, emb, b, h, dh, npos, span, false)
	enc, err := posenc.New("cope", posenc.Options{CopeNPos: npos})
	if err != nil {
		t.Fatal(err)
	}
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float32, 1)
	mk := func(n string, data []float64, shape ...int) *G.Node {
		return G.NewTensor(g, tensor.Float32, len(shape), G.WithShape(shape...), G.WithName(n),
			G.WithValue(graph.FromFloat64s(tensor.Float32, tensor.Shape(shape), data)))
	}
	s := &posenc.Site{G: g, Params: p, Prefix: "a", B: b, H: h, DHead: dh, DModel: h * dh, Span: span, Causal: true}
	terms, err := enc.(posenc.ScoreTermer).ScoreTerms(s, mk("q", q, b, h, span.TQ, dh), mk("k", k, b, h, span.TK, dh))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Set("a/cope_emb", emb); err != nil {
		t.Fatal(err)
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	closeTo(t, "float32 terms", graph.ToFloat64s(terms.Value()), want, 1e-5)
}

// TestCoPEParams: a causal LM with cope has one zero-initialised,
// non-decayed table "<prefix>/cope_emb" [dh, CopeNPos] per layer, and the
// option is the flag "cope-npos" (default 64).
func TestCoPEParams(t *testing.T) {
	o := posenc.Options{CopeNPos: 7}
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	lm, err := layers.NewLM(g, p, tinyLM("cope", o, true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lm.Fwd(intNode(g, "ids", []int{1, 4}, make([]int, 4))); err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, n := range p.Names() {
		if !strings.Contains(n, "cope") {
			continue
		}
		found = append(found, n)
		info, _ := p.Info(n)
		if info.Decay {
			t.Errorf("%s is weight-decayed", n)
		}
		if v := p.Value(n); !v.Shape().Eq(tensor.Shape{4, 7}) { // d 8, 2 heads
			t.Errorf("%s has shape %v, want [4 7]", n, v.Shape())
		}
		for _, x := range p.Float64s(n) {
			if x != 0 {
				t.Fatalf("%s is not zero-initialised", n)
			}
		}
	}
	if want := []string{"block0/attn/cope_emb", "block1/attn/cope_emb"}; strings.Join(found, ",") != strings.Join(want, ",") {
		t.Fatalf("cope parameters %v, want %v", found, want)
	}
	var oo posenc.Options
	if err := fields.Set(&oo, "cope-npos", "12"); err != nil || oo.CopeNPos != 12 {
		t.Fatalf("flag cope-npos: %v, CopeNPos %d", err, oo.CopeNPos)
	}
	if err := fields.Set(&oo, "cope-divide", "true"); err != nil || !oo.CopeDivide {
		t.Fatalf("flag cope-divide: %v, CopeDivide %v", err, oo.CopeDivide)
	}
	if d := (posenc.Options{}).Defaults(); d.CopeNPos != 64 || d.CopeDivide {
		t.Fatalf("defaults CopeNPos %d, CopeDivide %v, want 64, false", d.CopeNPos, d.CopeDivide)
	}
}

// TestCoPEErrors: a negative CopeNPos, a bidirectional site, shapes that do
// not match the site and a zero NPos of a literal are errors naming cope.
func TestCoPEErrors(t *testing.T) {
	if _, err := posenc.New("cope", posenc.Options{CopeNPos: -3}); err == nil || !strings.Contains(err.Error(), "cope") || !strings.Contains(err.Error(), "-3") {
		t.Fatalf("CopeNPos -3: error %v, want one naming cope and -3", err)
	}
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float64, 1)
	mk := func(n string, shape ...int) *G.Node {
		return G.NewTensor(g, tensor.Float64, len(shape), G.WithShape(shape...), G.WithName(n))
	}
	site := func(causal bool) *posenc.Site {
		return &posenc.Site{G: g, Params: p, Prefix: "x", B: 1, H: 2, DHead: 4, DModel: 8, Span: posenc.Span{TQ: 3, TK: 3}, Causal: causal}
	}
	q, k := mk("q", 1, 2, 3, 4), mk("k", 1, 2, 3, 4)
	cases := []struct {
		name string
		enc  *posenc.CoPE
		s    *posenc.Site
		q, k *G.Node
		want string
	}{
		{"bidirectional", &posenc.CoPE{NPos: 4}, site(false), q, k, "causal attention only"},
		{"k heads", &posenc.CoPE{NPos: 4}, site(true), q, mk("k2", 1, 1, 3, 4), "want"},
		{"q length", &posenc.CoPE{NPos: 4}, site(true), mk("q2", 1, 2, 2, 4), k, "want"},
		{"k width", &posenc.CoPE{NPos: 4}, site(true), q, mk("k3", 1, 2, 3, 2), "want"},
		{"nil k", &posenc.CoPE{NPos: 4}, site(true), q, nil, "nil"},
		{"zero npos", &posenc.CoPE{}, site(true), q, k, "positions 0"},
	}
	for _, c := range cases {
		_, err := c.enc.ScoreTerms(c.s, c.q, c.k)
		if err == nil || !strings.Contains(err.Error(), "posenc cope") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming cope and %q", c.name, err, c.want)
		}
	}
}
