package molecules

import (
	"slices"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/graphdata"
)

// FeatureElements are the elements with an element bucket of their own,
// in bucket order (C is 0). Every other element, and the wildcard '*', is
// ElementOther.
var FeatureElements = [...]string{"C", "N", "O", "S", "F", "Cl", "Br", "I", "P", "B", "Si", "Se", "H"}

// The sizes of the atom and bond encodings (see AtomFields).
const (
	// ElementOther is the element bucket of the elements not in
	// FeatureElements.
	ElementOther = len(FeatureElements)
	// NumElementBuckets is the number of element buckets (14).
	NumElementBuckets = len(FeatureElements) + 1
	// NumChargeBuckets: charge <= -2, -1, 0, +1, >= +2.
	NumChargeBuckets = 5
	// NumHBuckets: 0, 1, 2, 3, >= 4 hydrogens.
	NumHBuckets = 5
	// NumAtomFeatures is the number of atom feature indices (700):
	// element x aromatic x charge x hydrogens.
	NumAtomFeatures = NumElementBuckets * 2 * NumChargeBuckets * NumHBuckets
	// NumBondFeatures is the number of bond feature indices: single,
	// double, triple, quadruple, aromatic.
	NumBondFeatures = 5
	// OneHotWidth is the width of an atom's row of MolGraph.OneHot: the
	// element (14), aromatic (1), the charge (5) and the hydrogens (5).
	OneHotWidth = NumElementBuckets + 1 + NumChargeBuckets + NumHBuckets
)

// AtomFields are the four parts of an atom's feature.
type AtomFields struct {
	// Element is the index of the symbol in FeatureElements, or
	// ElementOther.
	Element int
	// Aromatic is 1 for an aromatic atom, else 0.
	Aromatic int
	// Charge is the charge bucket: 0 for <= -2, 1 for -1, 2 for 0, 3 for
	// +1, 4 for >= +2.
	Charge int
	// H is the hydrogen bucket: the number of hydrogens, 4 for 4 or more.
	H int
}

// Index returns the atom feature index in [0, NumAtomFeatures):
// ((Element*2 + Aromatic)*NumChargeBuckets + Charge)*NumHBuckets + H.
func (f AtomFields) Index() int {
	return ((f.Element*2+f.Aromatic)*NumChargeBuckets+f.Charge)*NumHBuckets + f.H
}

// DecodeAtomFeature returns the fields of an atom feature index, and false
// for an index outside [0, NumAtomFeatures).
func DecodeAtomFeature(idx int) (AtomFields, bool) {
	if idx < 0 || idx >= NumAtomFeatures {
		return AtomFields{}, false
	}
	var f AtomFields
	f.H, idx = idx%NumHBuckets, idx/NumHBuckets
	f.Charge, idx = idx%NumChargeBuckets, idx/NumChargeBuckets
	f.Aromatic, f.Element = idx%2, idx/2
	return f, true
}

// ElementBucket returns the index of symbol in FeatureElements, or
// ElementOther.
func ElementBucket(symbol string) int {
	if i := slices.Index(FeatureElements[:], symbol); i >= 0 {
		return i
	}
	return ElementOther
}

// ChargeBucket returns the bucket of a formal charge (see AtomFields).
func ChargeBucket(charge int) int {
	return min(max(charge, -2), 2) + 2
}

// HBucket returns the bucket of a hydrogen count (see AtomFields).
func HBucket(h int) int {
	return min(max(h, 0), NumHBuckets-1)
}

// BondFeature returns the bond feature index in [0, NumBondFeatures):
// single 0, double 1, triple 2, quadruple 3, aromatic 4; -1 for an order
// that is none of these.
func BondFeature(o BondOrder) int {
	if o < Single || o > Aromatic {
		return -1
	}
	return int(o) - 1
}

// Hydrogens returns the hydrogens on atom i: its HCount and the hydrogen
// atoms ([H]) bonded to it.
func (m *Molecule) Hydrogens(i int) int {
	h := m.Atoms[i].HCount
	for _, b := range m.Bonds {
		if b.A == i && m.Atoms[b.B].Number == 1 || b.B == i && m.Atoms[b.A].Number == 1 {
			h++
		}
	}
	return h
}

// AtomFields returns the feature fields of atom i; its hydrogens are
// Hydrogens(i).
func (m *Molecule) AtomFields(i int) AtomFields {
	return m.atomFields(i, m.Hydrogens(i))
}

// atomFields returns the fields of atom i with h hydrogens.
func (m *Molecule) atomFields(i, h int) AtomFields {
	a := m.Atoms[i]
	f := AtomFields{Element: ElementBucket(a.Symbol), Charge: ChargeBucket(a.Charge), H: HBucket(h)}
	if a.Aromatic {
		f.Aromatic = 1
	}
	return f
}

// MolGraph is a molecule as a graph for a graph model: node i is atom i
// (hydrogens written as atoms, [H], are nodes too), an edge is a bond.
type MolGraph struct {
	Graph *graphdata.Graph
	// Atoms [N] is the atom feature index of each node (AtomFields.Index).
	Atoms []int
	// Edges [E] are the bonds as Graph.Edges() lists them ({u, v}, u < v,
	// sorted); Bonds [E] is the bond feature index of each (BondFeature).
	Edges [][2]int
	Bonds []int
}

// ToGraph returns the molecule's graph and its features. Its error is
// graphdata.NewGraph's: for more than graphdata.MaxGraphNodes atoms.
func (m *Molecule) ToGraph() (*MolGraph, error) {
	edges := make([][2]int, len(m.Bonds))
	order := make(map[[2]int]BondOrder, len(m.Bonds))
	for i, b := range m.Bonds {
		edges[i] = [2]int{b.A, b.B}
		order[[2]int{min(b.A, b.B), max(b.A, b.B)}] = b.Order
	}
	hs := make([]int, len(m.Atoms)) // Hydrogens(i), in one pass
	for i, a := range m.Atoms {
		hs[i] += a.HCount
	}
	for _, b := range m.Bonds {
		if m.Atoms[b.B].Number == 1 {
			hs[b.A]++
		}
		if m.Atoms[b.A].Number == 1 {
			hs[b.B]++
		}
	}
	g, err := graphdata.NewGraph(len(m.Atoms), edges)
	if err != nil {
		return nil, errors.WithMessagef(err, "molecules: graph of %s", excerpt(m.SMILES, 0))
	}
	mg := &MolGraph{Graph: g, Atoms: make([]int, len(m.Atoms)), Edges: g.Edges()}
	for i := range m.Atoms {
		mg.Atoms[i] = m.atomFields(i, hs[i]).Index()
	}
	mg.Bonds = make([]int, len(mg.Edges))
	for i, e := range mg.Edges {
		mg.Bonds[i] = BondFeature(order[e])
	}
	return mg, nil
}

// OneHot returns the atom features as one-hot rows [N*OneHotWidth]
// (row-major, the layout of graphdata.Example.Features): columns 0-13 the
// element bucket, 14 aromatic (0 or 1), 15-19 the charge bucket, 20-24 the
// hydrogen bucket.
func (g *MolGraph) OneHot() []float32 {
	x := make([]float32, len(g.Atoms)*OneHotWidth)
	for i, idx := range g.Atoms {
		f, _ := DecodeAtomFeature(idx)
		row := x[i*OneHotWidth : (i+1)*OneHotWidth]
		row[f.Element] = 1
		row[NumElementBuckets] = float32(f.Aromatic)
		row[NumElementBuckets+1+f.Charge] = 1
		row[NumElementBuckets+1+NumChargeBuckets+f.H] = 1
	}
	return x
}
