package graph

import (
	"fmt"
	"io"
	"math"
	"math/rand"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// GradCheckElement is one element compared by GradCheckReport.
type GradCheckElement struct {
	// Node is the name of the checked node, Index the element's flat
	// (row-major) index and Coords its multi-index in the node's Shape.
	Node   string
	Shape  tensor.Shape
	Index  int
	Coords []int
	// Analytic is Gorgonia's symbolic gradient, Numeric the central
	// finite difference (loss(x+Eps) - loss(x-Eps)) / (2 Eps).
	Analytic, Numeric float64
	// Tol is the tolerance ATol + RTol*max(|Analytic|, |Numeric|) and OK
	// reports |Analytic - Numeric| <= Tol (false for NaNs).
	Tol float64
	OK  bool
}

// AbsErr is |Analytic - Numeric|.
func (e GradCheckElement) AbsErr() float64 { return math.Abs(e.Analytic - e.Numeric) }

// GradCheckResult is what GradCheckReport measured: the loss at the bound
// values, the options used (defaults filled in) and every compared element,
// node by node in the order of wrt, by increasing flat index within a node.
type GradCheckResult struct {
	Loss     float64
	Opts     GradCheckOpts
	Elements []GradCheckElement
}

// Failed is the number of elements that disagree.
func (r GradCheckResult) Failed() int {
	n := 0
	for _, e := range r.Elements {
		if !e.OK {
			n++
		}
	}
	return n
}

// MaxAbsErr is the largest |analytic - numeric| over the elements (NaN if
// any value is NaN, 0 if there are none).
func (r GradCheckResult) MaxAbsErr() float64 {
	m := 0.0
	for _, e := range r.Elements {
		d := e.AbsErr()
		if math.IsNaN(d) {
			return math.NaN()
		}
		m = math.Max(m, d)
	}
	return m
}

// Err returns nil if every element passed, otherwise an error in
// GradCheck's words: how many of the checked elements disagree and, for the
// first few, the node, the element and both values.
func (r GradCheckResult) Err() error {
	var fails []string
	n := 0
	for _, e := range r.Elements {
		if e.OK {
			continue
		}
		n++
		if len(fails) < maxReported {
			fails = append(fails, fmt.Sprintf("%s%v element %d %v: analytic %.9g, numeric %.9g", e.Node, e.Shape, e.Index, e.Coords, e.Analytic, e.Numeric))
		}
	}
	if n == 0 {
		return nil
	}
	return errors.Errorf("graph: GradCheck: %d of %d checked elements disagree: %s", n, len(r.Elements), strings.Join(fails, "; "))
}

// WriteTable writes the first max elements (all if max <= 0) as an aligned
// text table: node, index, analytic, numeric, |difference|, tolerance, ok.
func (r GradCheckResult) WriteTable(w io.Writer, max int) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "node\telement\tanalytic\tnumeric\t|a-n|\ttol\tok\t")
	for i, e := range r.Elements {
		if max > 0 && i >= max {
			break
		}
		ok := "yes"
		if !e.OK {
			ok = "NO"
		}
		fmt.Fprintf(tw, "%s\t%v\t%.9f\t%.9f\t%.2e\t%.2e\t%s\t\n", e.Node, e.Coords, e.Analytic, e.Numeric, e.AbsErr(), e.Tol, ok)
	}
	return tw.Flush()
}

// GradCheckReport is GradCheck returning the compared elements: it checks
// Gorgonia's symbolic gradient of the scalar loss with respect to each node
// of wrt against central finite differences exactly as GradCheck does (same
// options and defaults, same choice of elements for a given Seed and
// MaxPerNode, same tolerance), and returns every compared element with both
// values instead of a summary.
//
// A disagreement is not an error: it is an element with OK false, and
// GradCheckResult.Err turns the result into GradCheck's error. The error
// return is for checks that cannot be made, as in GradCheck: a non-scalar or
// non-float64 loss, a wrt node that is not a bound float64 input of g, a
// failure of Gorgonia to differentiate or run the graph, a loss that is not
// deterministic, or a run that overwrote the value of an input of the loss
// (the values are then restored). A Gorgonia panic is returned as an error.
//
// The gradient nodes stay in g; the values of wrt are unchanged on return.
// Each element costs two forward runs.
func GradCheckReport(g *G.ExprGraph, loss *G.Node, wrt G.Nodes, opts GradCheckOpts) (res GradCheckResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = GradCheckResult{}, errors.Errorf("graph: GradCheck: Gorgonia panicked: %v", r)
		}
	}()
	if err := gradCheckValidate(g, loss, wrt); err != nil {
		return res, err
	}
	if opts.Eps == 0 {
		opts.Eps = 1e-6
	}
	if opts.ATol == 0 {
		opts.ATol = 1e-6
	}
	if opts.RTol == 0 {
		opts.RTol = 1e-4
	}
	res.Opts = opts

	if _, err := G.Grad(loss, wrt...); err != nil {
		return res, errors.Wrap(err, "graph: GradCheck: G.Grad")
	}
	m := G.NewTapeMachine(g, G.BindDualValues(wrt...))
	defer m.Close()
	for _, n := range wrt {
		zeroDualGrad(n)
	}
	sub := g.ExactSubgraphRoots(loss)
	guard := newInputGuard(wrt, sub)
	if err := m.RunAll(); err != nil {
		return res, errors.Wrap(err, "graph: GradCheck: gradient run")
	}
	if err := guard.unchanged("gradient run"); err != nil {
		return res, err
	}
	base, err := scalarOf(loss.Value())
	if err != nil {
		return res, err
	}
	res.Loss = base
	analytic := make([][]float64, len(wrt))
	for i, n := range wrt {
		gv, err := n.Grad()
		if err != nil {
			return res, errors.Wrapf(err, "graph: GradCheck: no gradient for %v", n.Name())
		}
		analytic[i] = valueFloat64s(gv)
		if len(analytic[i]) != n.Shape().TotalSize() {
			return res, errors.Errorf("graph: GradCheck: gradient of %v has %d elements, the node %v", n.Name(), len(analytic[i]), n.Shape())
		}
	}

	fm := G.NewTapeMachine(sub)
	defer fm.Close()
	eval := func() (float64, error) {
		fm.Reset()
		if err := fm.RunAll(); err != nil {
			return 0, errors.Wrap(err, "graph: GradCheck: forward run")
		}
		return scalarOf(loss.Value())
	}
	if v, err := eval(); err != nil {
		return res, err
	} else if err := guard.unchanged("forward run"); err != nil {
		return res, err
	} else if math.Abs(v-base) > 1e-9*(1+math.Abs(base)) {
		return res, errors.Errorf("graph: GradCheck: the loss is not deterministic (%v, then %v)", base, v)
	}

	rng := rand.New(rand.NewSource(opts.Seed))
	for i, n := range wrt {
		get, set, err := elementAccess(n)
		if err != nil {
			return res, err
		}
		size := n.Shape().TotalSize()
		idx := make([]int, size)
		for k := range idx {
			idx[k] = k
		}
		if opts.MaxPerNode > 0 && size > opts.MaxPerNode {
			idx = rng.Perm(size)[:opts.MaxPerNode]
			sort.Ints(idx)
		}
		for _, k := range idx {
			orig := get(k)
			set(k, orig+opts.Eps)
			lp, err := eval()
			var lm float64
			if err == nil {
				set(k, orig-opts.Eps)
				lm, err = eval()
			}
			set(k, orig)
			if err != nil {
				return res, err
			}
			a, num := analytic[i][k], (lp-lm)/(2*opts.Eps)
			tol := opts.ATol + opts.RTol*math.Max(math.Abs(a), math.Abs(num))
			res.Elements = append(res.Elements, GradCheckElement{
				Node: nodeName(n), Shape: n.Shape().Clone(), Index: k, Coords: unravel(k, n.Shape()),
				Analytic: a, Numeric: num, Tol: tol, OK: math.Abs(a-num) <= tol,
			})
		}
	}
	return res, nil
}

// gradCheckValidate returns an error unless loss is a float64 scalar of g
// and every node of wrt a bound float64 input of g.
func gradCheckValidate(g *G.ExprGraph, loss *G.Node, wrt G.Nodes) error {
	if g == nil || loss == nil {
		return errors.New("graph: GradCheck: nil graph or loss")
	}
	if loss.Graph() != g {
		return errors.Errorf("graph: GradCheck: loss %v is not in the graph", loss.Name())
	}
	if !loss.IsScalar() || loss.Dtype() != tensor.Float64 {
		return errors.Errorf("graph: GradCheck: loss %v must be a float64 scalar, got %v of shape %v", loss.Name(), loss.Dtype(), loss.Shape())
	}
	if len(wrt) == 0 {
		return errors.New("graph: GradCheck: no nodes to check")
	}
	for i, n := range wrt {
		switch {
		case n == nil:
			return errors.Errorf("graph: GradCheck: wrt[%d] is nil", i)
		case n.Graph() != g:
			return errors.Errorf("graph: GradCheck: wrt[%d] %v is not in the graph", i, n.Name())
		case n.Op() != nil:
			return errors.Errorf("graph: GradCheck: wrt[%d] %v is not an input node (op %v)", i, n.Name(), n.Op())
		case n.Dtype() != tensor.Float64:
			return errors.Errorf("graph: GradCheck: wrt[%d] %v has dtype %v, want float64", i, n.Name(), n.Dtype())
		case n.Value() == nil:
			return errors.Errorf("graph: GradCheck: wrt[%d] %v has no value bound", i, n.Name())
		}
	}
	return nil
}

// inputGuard remembers the values of wrt and of every other bound float
// input of a loss's subgraph, to detect runs that write into them.
type inputGuard struct {
	nodes G.Nodes
	orig  [][]float64
}

func newInputGuard(wrt G.Nodes, sub *G.ExprGraph) *inputGuard {
	watched := append(G.Nodes(nil), wrt...)
	for _, n := range sub.AllNodes() {
		if n.Op() == nil && n.Value() != nil && isFloat(n.Dtype()) && !watched.Contains(n) {
			watched = append(watched, n)
		}
	}
	gd := &inputGuard{nodes: watched, orig: make([][]float64, len(watched))}
	for i, n := range watched {
		gd.orig[i] = valueFloat64s(n.Value())
	}
	return gd
}

// unchanged returns an error, after restoring every watched value, if a run
// (named by when) changed one.
func (gd *inputGuard) unchanged(when string) error {
	for i, n := range gd.nodes {
		now := valueFloat64s(n.Value())
		for k := range now {
			if now[k] != gd.orig[i][k] && !(math.IsNaN(now[k]) && math.IsNaN(gd.orig[i][k])) {
				for j, m := range gd.nodes {
					restoreValue(m.Value(), gd.orig[j])
				}
				return errors.Errorf("graph: GradCheck: the %s overwrote the value of input %s%v in place (element %d: %v, was %v): an op wrote into memory shared with the input, e.g. an in-place Add on a Gorgonia Reshape view of it", when, nodeName(n), n.Shape(), k, now[k], gd.orig[i][k])
			}
		}
	}
	return nil
}
