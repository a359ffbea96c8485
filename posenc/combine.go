package posenc

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

// Combined is a position encoding made of several: a structural bias
// together with a 1-D encoding ("tree+rope": the syntax-tree relation bias
// of TreeRel and the rotations of RoPE), or any other set of encodings
// whose hooks compose. Build it with NewCombined, which returns an
// Encoding whose dynamic type has exactly the attention hooks of its parts
// (see NewCombined); *Combined itself is the description shared by those
// types (Parts, Name, Accepts, Describe) and is not an encoding to give a
// model. AsCombined recovers it from the encoding.
//
// The hooks delegate to the parts, in the order given:
//
//   - InputAdder and AfterBlocker: applied in order, each part to the
//     previous part's output;
//   - QKTransformer: in order, each part transforming the previous part's q
//     and k;
//   - ScoreTermer: the sum of the parts' terms [B, H, Tq, Tk];
//   - ScoreBiaser: the sum of the parts' biases, each [H|1, Tq, Tk] or
//     [B|1, H|1, Tq, Tk], broadcast to [B|1, H|1, Tq, Tk] (rank 3 if every
//     part's bias is);
//   - Scaler: the one part that is a Scaler (two are an error of
//     NewCombined), else 1/sqrt(dh);
//   - ValueTermer: the sum of the parts' terms [B, H, Tq, dh].
//
// Positions: Accepts is the union of the parts' kinds, in order of first
// appearance. Each part's hook gets the site itself if the part serves the
// site's kind, else a copy with Pos = nil if the part serves line positions
// (the Span, which every site has: a 1-D encoding of a tree-biased model
// sees token order), else the hook returns an error naming the part and
// both kinds.
type Combined struct {
	parts  []Encoding
	scaler Scaler
	kinds  []PosKind
}

// hook bits: which attention hooks the parts have.
const (
	hookQK = 1 << iota
	hookTerms
	hookBias
	hookValue
)

// NewCombined returns the encoding made of encs (see Combined), named by
// their names joined with "+" ("tree+rope"). It returns an error if encs
// is empty, a part is nil, two parts have the same name (they would share
// parameters), or more than one part is a Scaler.
//
// Attention decides which hooks to call by type assertion, and claiming a
// hook is not free: a QKTransformer or ScoreTermer makes attention split
// the heads and leave its fused path, a ScoreBiaser must return a bias
// node and a ValueTermer a terms node, each costing a [B, H, Tq, Tk] or
// [B, H, Tq, dh] tensor. So the returned value is one of sixteen concrete
// types, the one that has exactly those four hooks that some part has (which
// is why NewCombined returns an Encoding, not a *Combined: one Go type has
// one method set).
// The three hooks whose neutral result is free and exact are always
// present: InputAdder and AfterBlocker return x itself (no node) when no
// part has them, and Scale returns 1/math.Sqrt(float64(dh)), the
// expression attention uses by default, bit for bit. PositionAccepter is
// always present. The result is not a TableBiaser, even when its only
// biasing part is one (its bias is a sum in general).
func NewCombined(encs ...Encoding) (Encoding, error) {
	if len(encs) == 0 {
		return nil, errors.New("posenc: combined encoding of no encodings")
	}
	for i, e := range encs {
		if e == nil {
			return nil, errors.Errorf("posenc: combined encoding: part %d is nil", i)
		}
	}
	c := &Combined{parts: slices.Clone(encs)}
	seen := map[string]bool{}
	var scalers []string
	mask := 0
	for _, e := range encs {
		n := e.Name()
		if seen[n] {
			return nil, errors.Errorf("posenc: combined encoding %s: %s appears twice (the parts would share parameters)", c.Name(), n)
		}
		seen[n] = true
		if sc, ok := e.(Scaler); ok {
			c.scaler = sc
			scalers = append(scalers, n)
		}
		if _, ok := e.(QKTransformer); ok {
			mask |= hookQK
		}
		if _, ok := e.(ScoreTermer); ok {
			mask |= hookTerms
		}
		if _, ok := e.(ScoreBiaser); ok {
			mask |= hookBias
		}
		if _, ok := e.(ValueTermer); ok {
			mask |= hookValue
		}
		for _, k := range Accepted(e) {
			if !slices.Contains(c.kinds, k) {
				c.kinds = append(c.kinds, k)
			}
		}
	}
	if len(scalers) > 1 {
		return nil, errors.Errorf("posenc: combined encoding %s: %s each set the score scale; at most one part may be a Scaler",
			c.Name(), strings.Join(scalers, " and "))
	}
	return c.wrap(mask), nil
}

// AsCombined returns the description of a combined encoding built by
// NewCombined, and false for any other encoding.
func AsCombined(e Encoding) (*Combined, bool) {
	if w, ok := e.(interface{ combined() *Combined }); ok {
		return w.combined(), true
	}
	return nil, false
}

func (c *Combined) combined() *Combined { return c }

// Parts returns the encodings c is made of, in order.
func (c *Combined) Parts() []Encoding { return slices.Clone(c.parts) }

// Name implements Encoding: the parts' names joined with "+".
func (c *Combined) Name() string {
	n := make([]string, len(c.parts))
	for i, e := range c.parts {
		n[i] = e.Name()
	}
	return strings.Join(n, "+")
}

// Accepts implements PositionAccepter: the union of the parts' kinds.
func (c *Combined) Accepts() []PosKind { return slices.Clone(c.kinds) }

// Describe lists the parts with the kinds of positions they serve and the
// hooks they have: "tree+rope: tree (pairwise; score bias), rope (line;
// q/k transform)".
func (c *Combined) Describe() string {
	var ps []string
	for _, e := range c.parts {
		var kinds, hooks []string
		for _, k := range Accepted(e) {
			kinds = append(kinds, string(k))
		}
		for _, h := range []struct {
			has  bool
			name string
		}{
			{hasHook[InputAdder](e), "input"}, {hasHook[QKTransformer](e), "q/k transform"}, {hasHook[ScoreTermer](e), "score terms"},
			{hasHook[ScoreBiaser](e), "score bias"}, {hasHook[Scaler](e), "scale"}, {hasHook[ValueTermer](e), "value terms"},
			{hasHook[AfterBlocker](e), "after block"},
		} {
			if h.has {
				hooks = append(hooks, h.name)
			}
		}
		ps = append(ps, fmt.Sprintf("%s (%s; %s)", e.Name(), strings.Join(kinds, " or "), strings.Join(hooks, ", ")))
	}
	return c.Name() + ": " + strings.Join(ps, ", ")
}

func hasHook[T any](e Encoding) bool { _, ok := e.(T); return ok }

// siteFor returns the site part e sees: s if e serves s's kind, a copy
// with Pos = nil if it serves line positions, else an error naming both.
func (c *Combined) siteFor(e Encoding, s *Site) (*Site, error) {
	acc := Accepted(e)
	if slices.Contains(acc, s.Kind()) {
		return s, nil
	}
	if slices.Contains(acc, PosLine) {
		line := *s
		line.Pos = nil
		return &line, nil
	}
	names := make([]string, len(acc))
	for i, k := range acc {
		names[i] = string(k)
	}
	if s.Pos == nil {
		return nil, errors.Errorf("posenc %s: part %s serves %s positions, not line positions", c.Name(), e.Name(), strings.Join(names, " or "))
	}
	return nil, errors.Errorf("posenc %s: part %s serves %s positions, neither the site's %s positions nor line positions",
		c.Name(), e.Name(), strings.Join(names, " or "), s.Pos.Describe())
}

// visit calls do for every part that has a hook (has), in order, with the
// site the part serves; it stops at the first error.
func (c *Combined) visit(s *Site, has func(Encoding) bool, do func(e Encoding, ps *Site) error) error {
	for _, e := range c.parts {
		if !has(e) {
			continue
		}
		ps, err := c.siteFor(e, s)
		if err != nil {
			return err
		}
		if err := do(e, ps); err != nil {
			return err
		}
	}
	return nil
}

// AddToInput implements InputAdder: the parts' AddToInput in order (x
// itself if none has one).
func (c *Combined) AddToInput(s *Site, x *G.Node) (*G.Node, error) {
	return c.chain(s, x, hasHook[InputAdder], func(e Encoding, ps *Site, x *G.Node) (*G.Node, error) {
		return e.(InputAdder).AddToInput(ps, x)
	})
}

// AfterBlock implements AfterBlocker: the parts' AfterBlock in order (x
// itself if none has one).
func (c *Combined) AfterBlock(s *Site, x *G.Node) (*G.Node, error) {
	return c.chain(s, x, hasHook[AfterBlocker], func(e Encoding, ps *Site, x *G.Node) (*G.Node, error) {
		return e.(AfterBlocker).AfterBlock(ps, x)
	})
}

// chain applies hook of the parts that have it (has) to x in turn.
func (c *Combined) chain(s *Site, x *G.Node, has func(Encoding) bool, hook func(e Encoding, ps *Site, x *G.Node) (*G.Node, error)) (*G.Node, error) {
	err := c.visit(s, has, func(e Encoding, ps *Site) (err error) {
		x, err = hook(e, ps, x)
		return err
	})
	if err != nil {
		return nil, err
	}
	return x, nil
}

// Scale implements Scaler: the Scaler part's scale, else 1/sqrt(dHead).
func (c *Combined) Scale(dHead int) float64 {
	if c.scaler != nil {
		return c.scaler.Scale(dHead)
	}
	return 1 / math.Sqrt(float64(dHead))
}

func (c *Combined) transformQK(s *Site, q, k *G.Node) (*G.Node, *G.Node, error) {
	err := c.visit(s, hasHook[QKTransformer], func(e Encoding, ps *Site) (err error) {
		q, k, err = e.(QKTransformer).TransformQK(ps, q, k)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return q, k, nil
}

// sum adds the outputs of hook over the parts that have it (has),
// broadcasting as sumBroadcast.
func (c *Combined) sum(s *Site, what string, has func(Encoding) bool, hook func(e Encoding, ps *Site) (*G.Node, error)) (*G.Node, error) {
	var acc *G.Node
	err := c.visit(s, has, func(e Encoding, ps *Site) error {
		n, err := hook(e, ps)
		if err != nil {
			return err
		}
		if acc == nil {
			acc = n
		} else if acc, err = sumBroadcast(acc, n); err != nil {
			return errors.Wrapf(err, "posenc %s: adding the %s of %s", c.Name(), what, e.Name())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if acc == nil {
		return nil, errors.Errorf("posenc %s: no part has %s", c.Name(), what)
	}
	return acc, nil
}

func (c *Combined) scoreTerms(s *Site, q, k *G.Node) (*G.Node, error) {
	return c.sum(s, "score terms", hasHook[ScoreTermer], func(e Encoding, ps *Site) (*G.Node, error) {
		return e.(ScoreTermer).ScoreTerms(ps, q, k)
	})
}

func (c *Combined) scoreBias(s *Site) (*G.Node, error) {
	return c.sum(s, "score bias", hasHook[ScoreBiaser], func(e Encoding, ps *Site) (*G.Node, error) {
		return e.(ScoreBiaser).ScoreBias(ps)
	})
}

func (c *Combined) valueTerms(s *Site, probs *G.Node) (*G.Node, error) {
	return c.sum(s, "value terms", hasHook[ValueTermer], func(e Encoding, ps *Site) (*G.Node, error) {
		return e.(ValueTermer).ValueTerms(ps, probs)
	})
}

// sumBroadcast returns a + b for shapes that broadcast onto a common shape
// by numpy's rules (right-aligned, each axis equal or 1): [H, Tq, Tk] +
// [B, 1, Tq, Tk] is [B, H, Tq, Tk]. When neither operand has the common
// shape, a is first broadcast onto zeros of it.
func sumBroadcast(a, b *G.Node) (*G.Node, error) {
	as, bs := a.Shape(), b.Shape()
	if len(bs) > len(as) {
		a, b, as, bs = b, a, bs, as
	}
	out := as.Clone()
	for i := range bs {
		o := len(as) - len(bs) + i
		switch {
		case bs[i] == out[o]:
		case out[o] == 1:
			out[o] = bs[i]
		case bs[i] != 1:
			return nil, errors.Errorf("shapes %v and %v do not broadcast", []int(as), []int(bs))
		}
	}
	if !slices.Equal(out, as) {
		zeros := G.NewConstant(tensor.New(tensor.WithShape(out...), tensor.Of(a.Dtype())))
		var err error
		if a, err = graph.BroadcastAdd(zeros, a); err != nil {
			return nil, err
		}
	}
	return graph.BroadcastAdd(a, b)
}

// The hook adapters: each is Combined under another name, with one hook
// method, so that a struct embedding *Combined and some of them has
// exactly those hooks.
type (
	hookQKT   Combined
	hookTermT Combined
	hookBiasT Combined
	hookValT  Combined
)

// TransformQK implements QKTransformer: the parts' transforms in order.
func (h *hookQKT) TransformQK(s *Site, q, k *G.Node) (*G.Node, *G.Node, error) {
	return (*Combined)(h).transformQK(s, q, k)
}

// ScoreTerms implements ScoreTermer: the sum of the parts' terms.
func (h *hookTermT) ScoreTerms(s *Site, q, k *G.Node) (*G.Node, error) {
	return (*Combined)(h).scoreTerms(s, q, k)
}

// ScoreBias implements ScoreBiaser: the sum of the parts' biases.
func (h *hookBiasT) ScoreBias(s *Site) (*G.Node, error) { return (*Combined)(h).scoreBias(s) }

// ValueTerms implements ValueTermer: the sum of the parts' terms.
func (h *hookValT) ValueTerms(s *Site, probs *G.Node) (*G.Node, error) {
	return (*Combined)(h).valueTerms(s, probs)
}

// The sixteen combined types, named by the hooks they add to Combined's:
// q = QKTransformer, t = ScoreTermer, b = ScoreBiaser, v = ValueTermer.
type (
	comb  struct{ *Combined }
	combQ struct {
		*Combined
		*hookQKT
	}
	combT struct {
		*Combined
		*hookTermT
	}
	combQT struct {
		*Combined
		*hookQKT
		*hookTermT
	}
	combB struct {
		*Combined
		*hookBiasT
	}
	combQB struct {
		*Combined
		*hookQKT
		*hookBiasT
	}
	combTB struct {
		*Combined
		*hookTermT
		*hookBiasT
	}
	combQTB struct {
		*Combined
		*hookQKT
		*hookTermT
		*hookBiasT
	}
	combV struct {
		*Combined
		*hookValT
	}
	combQV struct {
		*Combined
		*hookQKT
		*hookValT
	}
	combTV struct {
		*Combined
		*hookTermT
		*hookValT
	}
	combQTV struct {
		*Combined
		*hookQKT
		*hookTermT
		*hookValT
	}
	combBV struct {
		*Combined
		*hookBiasT
		*hookValT
	}
	combQBV struct {
		*Combined
		*hookQKT
		*hookBiasT
		*hookValT
	}
	combTBV struct {
		*Combined
		*hookTermT
		*hookBiasT
		*hookValT
	}
	combQTBV struct {
		*Combined
		*hookQKT
		*hookTermT
		*hookBiasT
		*hookValT
	}
)

// wrap returns c as the combined type with the hooks of mask.
func (c *Combined) wrap(mask int) Encoding {
	q, t, b, v := (*hookQKT)(c), (*hookTermT)(c), (*hookBiasT)(c), (*hookValT)(c)
	switch mask {
	case hookQK:
		return combQ{c, q}
	case hookTerms:
		return combT{c, t}
	case hookQK | hookTerms:
		return combQT{c, q, t}
	case hookBias:
		return combB{c, b}
	case hookQK | hookBias:
		return combQB{c, q, b}
	case hookTerms | hookBias:
		return combTB{c, t, b}
	case hookQK | hookTerms | hookBias:
		return combQTB{c, q, t, b}
	case hookValue:
		return combV{c, v}
	case hookQK | hookValue:
		return combQV{c, q, v}
	case hookTerms | hookValue:
		return combTV{c, t, v}
	case hookQK | hookTerms | hookValue:
		return combQTV{c, q, t, v}
	case hookBias | hookValue:
		return combBV{c, b, v}
	case hookQK | hookBias | hookValue:
		return combQBV{c, q, b, v}
	case hookTerms | hookBias | hookValue:
		return combTBV{c, t, b, v}
	case hookQK | hookTerms | hookBias | hookValue:
		return combQTBV{c, q, t, b, v}
	}
	return comb{c}
}
