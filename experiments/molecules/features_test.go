package molecules

import (
	"slices"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/experiments/graphdata"
)

func TestAtomFeatureEncoding(t *testing.T) {
	if NumAtomFeatures != 700 || NumElementBuckets != 14 || ElementOther != 13 || OneHotWidth != 25 {
		t.Fatalf("sizes: %d features, %d element buckets, other %d, one-hot %d", NumAtomFeatures, NumElementBuckets, ElementOther, OneHotWidth)
	}
	seen := make([]bool, NumAtomFeatures)
	for e := range NumElementBuckets {
		for ar := range 2 {
			for q := range NumChargeBuckets {
				for h := range NumHBuckets {
					f := AtomFields{Element: e, Aromatic: ar, Charge: q, H: h}
					idx := f.Index()
					if idx < 0 || idx >= NumAtomFeatures || seen[idx] {
						t.Fatalf("%+v: index %d out of range or repeated", f, idx)
					}
					seen[idx] = true
					if g, ok := DecodeAtomFeature(idx); !ok || g != f {
						t.Fatalf("DecodeAtomFeature(%d) = %+v %v, want %+v", idx, g, ok, f)
					}
				}
			}
		}
	}
	if f := (AtomFields{Element: 1, Aromatic: 1, Charge: 2, H: 0}); f.Index() != ((1*2+1)*5+2)*5 {
		t.Errorf("aromatic n: index %d", f.Index())
	}
	for _, idx := range []int{-1, NumAtomFeatures} {
		if _, ok := DecodeAtomFeature(idx); ok {
			t.Errorf("DecodeAtomFeature(%d) ok", idx)
		}
	}
	for _, c := range []struct {
		in, want int
		f        func(int) int
		name     string
	}{
		{-7, 0, ChargeBucket, "charge"}, {-2, 0, ChargeBucket, "charge"}, {-1, 1, ChargeBucket, "charge"},
		{0, 2, ChargeBucket, "charge"}, {1, 3, ChargeBucket, "charge"}, {2, 4, ChargeBucket, "charge"}, {15, 4, ChargeBucket, "charge"},
		{0, 0, HBucket, "H"}, {3, 3, HBucket, "H"}, {4, 4, HBucket, "H"}, {9, 4, HBucket, "H"},
	} {
		if got := c.f(c.in); got != c.want {
			t.Errorf("%s bucket of %d: %d, want %d", c.name, c.in, got, c.want)
		}
	}
	for sym, want := range map[string]int{"C": 0, "N": 1, "O": 2, "Cl": 5, "Se": 11, "H": 12, "Fe": ElementOther, "*": ElementOther, "c": ElementOther} {
		if got := ElementBucket(sym); got != want {
			t.Errorf("ElementBucket(%q) = %d, want %d", sym, got, want)
		}
	}
	for o, want := range map[BondOrder]int{Single: 0, Double: 1, Triple: 2, Quadruple: 3, Aromatic: 4, 0: -1, 6: -1} {
		if got := BondFeature(o); got != want {
			t.Errorf("BondFeature(%v) = %d, want %d", o, got, want)
		}
	}
}

func TestToGraph(t *testing.T) {
	m := mustParse(t, "Cn1cnc2c1c(=O)n(C)c(=O)n2C") // caffeine
	g, err := m.ToGraph()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Graph.Check(0); err != nil {
		t.Fatal(err)
	}
	if g.Graph.N != 14 || g.Graph.NumEdges() != 15 || len(g.Atoms) != 14 || len(g.Edges) != 15 || len(g.Bonds) != 15 {
		t.Fatalf("caffeine: %d nodes, %d edges, %d atom and %d bond features", g.Graph.N, g.Graph.NumEdges(), len(g.Atoms), len(g.Bonds))
	}
	count := make([]int, NumBondFeatures)
	for i, e := range g.Edges {
		if e != g.Graph.Edges()[i] {
			t.Fatalf("edge %d %v, graph's %v", i, e, g.Graph.Edges()[i])
		}
		count[g.Bonds[i]]++
	}
	// single bonds to the 3 methyls, the 2 C=O, 10 aromatic bonds in the rings
	if want := []int{3, 2, 0, 0, 10}; !slices.Equal(count, want) {
		t.Errorf("caffeine bond features %v, want %v", count, want)
	}
	// the bond feature of each edge is its bond's
	for _, b := range m.Bonds {
		e := [2]int{min(b.A, b.B), max(b.A, b.B)}
		i := indexOfEdge(g.Edges, e)
		if i < 0 || g.Bonds[i] != BondFeature(b.Order) {
			t.Errorf("bond %v: edge %d, feature %v", b, i, g.Bonds)
		}
	}
	want := map[int]AtomFields{
		0:  {Element: 0, Aromatic: 0, Charge: 2, H: 3}, // CH3
		1:  {Element: 1, Aromatic: 1, Charge: 2, H: 0}, // n
		2:  {Element: 0, Aromatic: 1, Charge: 2, H: 1}, // cH
		7:  {Element: 2, Aromatic: 0, Charge: 2, H: 0}, // =O
		10: {Element: 0, Aromatic: 1, Charge: 2, H: 0}, // c(=O)
	}
	for i, f := range want {
		if g.Atoms[i] != f.Index() {
			got, _ := DecodeAtomFeature(g.Atoms[i])
			t.Errorf("caffeine atom %d: %+v, want %+v", i, got, f)
		}
	}

	// charges, other elements, explicit hydrogens
	for _, c := range []struct {
		smiles string
		atom   int
		want   AtomFields
	}{
		{"CC(=O)[O-]", 3, AtomFields{Element: 2, Charge: 1}},
		{"[NH4+]", 0, AtomFields{Element: 1, Charge: 3, H: 4}},
		{"[Fe+2]", 0, AtomFields{Element: ElementOther, Charge: 4}},
		{"[Sb-3]", 0, AtomFields{Element: ElementOther, Charge: 0}},
		{"[H]C([H])([H])[H]", 1, AtomFields{Element: 0, Charge: 2, H: 4}},
		{"[H]C([H])([H])[H]", 0, AtomFields{Element: 12, Charge: 2}},
		{"[2H]C", 1, AtomFields{Element: 0, Charge: 2, H: 4}},
		{"c1cc[nH]c1", 3, AtomFields{Element: 1, Aromatic: 1, Charge: 2, H: 1}},
		{"[se]1cccc1", 0, AtomFields{Element: 11, Aromatic: 1, Charge: 2}},
	} {
		m := mustParse(t, c.smiles)
		if got := m.AtomFields(c.atom); got != c.want {
			t.Errorf("%s atom %d: %+v, want %+v", c.smiles, c.atom, got, c.want)
		}
		g, err := m.ToGraph()
		if err != nil {
			t.Fatal(err)
		}
		if g.Atoms[c.atom] != c.want.Index() {
			t.Errorf("%s atom %d: graph feature %d, want %d", c.smiles, c.atom, g.Atoms[c.atom], c.want.Index())
		}
	}

	// components of a salt; isolated atoms
	g, err = mustParse(t, "[Na+].[Cl-]").ToGraph()
	if err != nil {
		t.Fatal(err)
	}
	if comp, n := graphdata.Components(g.Graph); n != 2 || g.Graph.NumEdges() != 0 || comp[1] != 1 {
		t.Errorf("[Na+].[Cl-]: %d components %v, %d edges", n, comp, g.Graph.NumEdges())
	}

	// the graph package's limit
	if _, err := mustParse(t, strings.Repeat("C", graphdata.MaxGraphNodes+1)).ToGraph(); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("%d atoms: error %v", graphdata.MaxGraphNodes+1, err)
	}
}

func indexOfEdge(edges [][2]int, e [2]int) int {
	for i, x := range edges {
		if x == e {
			return i
		}
	}
	return -1
}

func TestOneHot(t *testing.T) {
	g, err := mustParse(t, "C[n+]1ccccc1.[Cl-]").ToGraph()
	if err != nil {
		t.Fatal(err)
	}
	x := g.OneHot()
	if len(x) != g.Graph.N*OneHotWidth {
		t.Fatalf("%d values for %d atoms", len(x), g.Graph.N)
	}
	rows := map[int][]int{ // the columns set to 1
		0: {0, 15 + 2, 20 + 3},     // CH3
		1: {1, 14, 15 + 3, 20 + 0}, // [n+]
		2: {0, 14, 15 + 2, 20 + 1}, // cH
		7: {5, 15 + 1, 20 + 0},     // [Cl-]
	}
	for i, cols := range rows {
		row := x[i*OneHotWidth : (i+1)*OneHotWidth]
		want := make([]float32, OneHotWidth)
		for _, c := range cols {
			want[c] = 1
		}
		for c := range row {
			if row[c] != want[c] {
				t.Errorf("atom %d: row %v, want %v", i, row, want)
				break
			}
		}
	}
}
