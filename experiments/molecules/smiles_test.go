package molecules

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/experiments/graphdata"
)

func mustParse(t testing.TB, s string) *Molecule {
	t.Helper()
	m, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// nested is the OpenSMILES example of deep branches: C22H46.
const nested = "C(C(C(C(C(C(C(C(C(C(C(C(C(C(C(C(C(C(C(C(C))))))))))))))))))))C"

func TestParseKnownMolecules(t *testing.T) {
	for _, c := range []struct {
		name, smiles string
		heavy, bonds int
		hydrogens    int
		aromatic     int
		components   int
		formula      string
	}{
		{"methane", "C", 1, 0, 4, 0, 1, "CH4"},
		{"ethanol", "CCO", 3, 2, 6, 0, 1, "C2H6O"},
		{"benzene", "c1ccccc1", 6, 6, 6, 6, 1, "C6H6"},
		{"benzene Kekulé", "C1=CC=CC=C1", 6, 6, 6, 0, 1, "C6H6"},
		{"cyclohexane", "C1CCCCC1", 6, 6, 12, 0, 1, "C6H12"},
		{"pyridine", "c1ccncc1", 6, 6, 5, 6, 1, "C5H5N"},
		{"pyrrole", "c1cc[nH]c1", 5, 5, 5, 5, 1, "C4H5N"},
		{"thiophene", "c1ccsc1", 5, 5, 4, 5, 1, "C4H4S"},
		{"furan", "c1ccoc1", 5, 5, 4, 5, 1, "C4H4O"},
		{"selenophene", "[se]1cccc1", 5, 5, 4, 5, 1, "C4H4Se"},
		{"naphthalene", "c1ccc2ccccc2c1", 10, 11, 8, 10, 1, "C10H8"},
		{"indole", "c1ccc2[nH]ccc2c1", 9, 10, 7, 9, 1, "C8H7N"},
		{"biphenyl", "c1ccccc1-c2ccccc2", 12, 13, 10, 12, 1, "C12H10"},
		{"caffeine", "Cn1cnc2c1c(=O)n(C)c(=O)n2C", 14, 15, 10, 9, 1, "C8H10N4O2"},
		{"acetic acid", "CC(=O)O", 4, 3, 4, 0, 1, "C2H4O2"},
		{"acetate", "CC(=O)[O-]", 4, 3, 3, 0, 1, "C2H3O2-"},
		{"ammonium", "[NH4+]", 1, 0, 4, 0, 1, "H4N+"},
		{"iron(II)", "[Fe+2]", 1, 0, 0, 0, 1, "Fe+2"},
		{"ring %10", "C%10CCCCC%10", 6, 6, 12, 0, 1, "C6H12"},
		{"ring %01 closes 1", "C1CCCCC%01", 6, 6, 12, 0, 1, "C6H12"},
		{"ring 0", "C0CCCCC0", 6, 6, 12, 0, 1, "C6H12"},
		{"ring number reused", "C1CCCCC1C1CCCCC1", 12, 13, 22, 0, 1, "C12H22"},
		{"spiro", "C12(CCCCC1)CCCCC2", 11, 12, 20, 0, 1, "C11H20"},
		{"cyclohexene, bond at both ends", "C=1CCCCC=1", 6, 6, 10, 0, 1, "C6H10"},
		{"cyclohexene, bond at the end", "C1CCCCC=1", 6, 6, 10, 0, 1, "C6H10"},
		{"salt", "[Na+].[Cl-]", 2, 0, 0, 0, 2, "ClNa"},
		{"dot inside a branch", "c1cc(O.NCCO)ccc1", 11, 10, 13, 6, 2, "C8H13NO2"},
		{"ethane from fragments", "C1.C1", 2, 1, 6, 0, 1, "C2H6"},
		{"neopentane", "CC(C)(C)C", 5, 4, 12, 0, 1, "C5H12"},
		{"nested branches", nested, 22, 21, 46, 0, 1, "C22H46"},
		{"thiosulfuric acid", "OS(=O)(=S)O", 5, 4, 2, 0, 1, "H2O3S2"},
		{"dimethyl sulfoxide", "CS(C)=O", 4, 3, 6, 0, 1, "C2H6OS"},
		{"sulfuric acid", "OS(=O)(=O)O", 5, 4, 2, 0, 1, "H2O4S"},
		{"phosphorus pentachloride", "ClP(Cl)(Cl)(Cl)Cl", 6, 5, 0, 0, 1, "Cl5P"},
		{"nitromethane, pentavalent N", "CN(=O)=O", 4, 3, 3, 0, 1, "CH3NO2"},
		{"acetylene", "C#C", 2, 1, 2, 0, 1, "C2H2"},
		{"trans-difluoroethene", "F/C=C/F", 4, 3, 2, 0, 1, "C2H2F2"},
		{"chiral centre", "[13C@@H](F)(Cl)Br", 4, 3, 1, 0, 1, "CHBrClF"},
		{"explicit hydrogens", "[H]C([H])([H])[H]", 1, 4, 4, 0, 1, "CH4"},
		{"deuterium", "[2H]C", 1, 1, 4, 0, 1, "CH4"},
		{"wildcard", "*C", 2, 1, 3, 0, 1, "CH3*"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := mustParse(t, c.smiles)
			if m.HeavyAtoms() != c.heavy || len(m.Bonds) != c.bonds || m.NumHydrogens() != c.hydrogens || m.AromaticAtoms() != c.aromatic {
				t.Errorf("%s: %d heavy atoms, %d bonds, %d H, %d aromatic; want %d, %d, %d, %d",
					c.smiles, m.HeavyAtoms(), len(m.Bonds), m.NumHydrogens(), m.AromaticAtoms(), c.heavy, c.bonds, c.hydrogens, c.aromatic)
			}
			if f := m.Formula(); f != c.formula {
				t.Errorf("%s: formula %s, want %s", c.smiles, f, c.formula)
			}
			g, err := m.ToGraph()
			if err != nil {
				t.Fatal(err)
			}
			if _, n := graphdata.Components(g.Graph); n != c.components {
				t.Errorf("%s: %d components, want %d", c.smiles, n, c.components)
			}
		})
	}
}

// TestImplicitHydrogens checks each atom's hydrogens where the valence
// rules decide: the higher valences of N, P and S, sums above every
// valence, and aromatic atoms (one hydrogen fewer, none when the bonds
// already fill the lowest valence: the three-connected n of caffeine and
// the s of thiophene have none).
func TestImplicitHydrogens(t *testing.T) {
	for _, c := range []struct {
		smiles string
		hs     []int
	}{
		{"C", []int{4}},
		{"CCO", []int{3, 2, 1}},
		{"C=O", []int{2, 0}},
		{"C#N", []int{1, 0}},
		{"N", []int{3}},
		{"CN(=O)=O", []int{3, 0, 0, 0}},                 // N: sum 5, valence 5
		{"CN=C", []int{3, 0, 2}},                        // N: sum 3
		{"C[N](C)(C)(C)C", []int{3, 0, 3, 3, 3, 3}},     // bracket: as written
		{"CN(C)(C)(C)C", []int{3, 0, 3, 3, 3, 3}},       // N: sum 5
		{"CN(C)(C)C", []int{3, 1, 3, 3, 3}},             // N: sum 4, valence 5
		{"CN(C)=C", []int{3, 1, 3, 2}},                  // N: sum 4, valence 5
		{"CN(C)(C)(C)(C)C", []int{3, 0, 3, 3, 3, 3, 3}}, // N: sum 6 above 5: 0
		{"P", []int{3}},
		{"CP(C)(C)=C", []int{3, 0, 3, 3, 2}}, // P: sum 5
		{"CP(C)(C)C", []int{3, 1, 3, 3, 3}},  // P: sum 4, valence 5
		{"S", []int{2}},
		{"CS(C)=O", []int{3, 0, 3, 0}},        // S: sum 4
		{"CS(=O)(=O)C", []int{3, 0, 0, 0, 3}}, // S: sum 6
		{"CS(C)(=C)=C", []int{3, 0, 3, 2, 2}}, // S: sum 6
		{"CS=C", []int{3, 1, 2}},              // S: sum 3, valence 4
		{"B", []int{3}},
		{"FCl", []int{0, 0}},
		{"Br", []int{1}},
		{"I", []int{1}},
		{"C(C)(C)(C)(C)C", []int{0, 3, 3, 3, 3, 3}}, // C: sum 5 above 4
		{"*", []int{0}},
		{"c1ccccc1", []int{1, 1, 1, 1, 1, 1}},
		{"c1ccncc1", []int{1, 1, 1, 0, 1, 1}},
		{"c1ccsc1", []int{1, 1, 1, 0, 1}},
		{"c1ccoc1", []int{1, 1, 1, 0, 1}},
		{"Cn1cnc2c1c(=O)n(C)c(=O)n2C", []int{3, 0, 1, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 3}},
		{"Cc1ccccc1", []int{3, 0, 1, 1, 1, 1, 1}},
		{"c1cc[nH]c1", []int{1, 1, 1, 1, 1}},
		{"b1ccccc1", []int{0, 1, 1, 1, 1, 1}},
		{"c1ccpcc1", []int{1, 1, 1, 0, 1, 1}},
		{"O=c1cc[nH]cc1", []int{0, 0, 1, 1, 1, 1, 1}},
		{"[CH3][CH2]O", []int{3, 2, 1}},
		{"[C]", []int{0}},
	} {
		m := mustParse(t, c.smiles)
		got := make([]int, len(m.Atoms))
		for i, a := range m.Atoms {
			got[i] = a.HCount
		}
		if !slices.Equal(got, c.hs) {
			t.Errorf("%s: hydrogens %v, want %v", c.smiles, got, c.hs)
		}
	}
}

func TestBracketAtoms(t *testing.T) {
	for _, c := range []struct {
		smiles string
		want   Atom
	}{
		{"[13C@@H](F)(Cl)Br", Atom{Symbol: "C", Number: 6, HCount: 1, Isotope: 13, Bracket: true}},
		{"[NH4+]", Atom{Symbol: "N", Number: 7, HCount: 4, Charge: 1, Isotope: NoIsotope, Bracket: true}},
		{"[O-]", Atom{Symbol: "O", Number: 8, Charge: -1, Isotope: NoIsotope, Bracket: true}},
		{"[OH-1]", Atom{Symbol: "O", Number: 8, HCount: 1, Charge: -1, Isotope: NoIsotope, Bracket: true}},
		{"[Fe+2]", Atom{Symbol: "Fe", Number: 26, Charge: 2, Isotope: NoIsotope, Bracket: true}},
		{"[Zn++]", Atom{Symbol: "Zn", Number: 30, Charge: 2, Isotope: NoIsotope, Bracket: true}},
		{"[Cu+++]", Atom{Symbol: "Cu", Number: 29, Charge: 3, Isotope: NoIsotope, Bracket: true}},
		{"[Sb-3]", Atom{Symbol: "Sb", Number: 51, Charge: -3, Isotope: NoIsotope, Bracket: true}},
		{"[Ti+15]", Atom{Symbol: "Ti", Number: 22, Charge: 15, Isotope: NoIsotope, Bracket: true}},
		{"[se]1cccc1", Atom{Symbol: "Se", Number: 34, Aromatic: true, Isotope: NoIsotope, Bracket: true}},
		{"[as]1cccc1", Atom{Symbol: "As", Number: 33, Aromatic: true, Isotope: NoIsotope, Bracket: true}},
		{"[nH]1cccc1", Atom{Symbol: "N", Number: 7, Aromatic: true, HCount: 1, Isotope: NoIsotope, Bracket: true}},
		{"[CH4:2]", Atom{Symbol: "C", Number: 6, HCount: 4, Class: 2, Isotope: NoIsotope, Bracket: true}},
		{"[NH4+:005]", Atom{Symbol: "N", Number: 7, HCount: 4, Charge: 1, Class: 5, Isotope: NoIsotope, Bracket: true}},
		{"[0S]", Atom{Symbol: "S", Number: 16, Isotope: 0, Bracket: true}},
		{"[238U]", Atom{Symbol: "U", Number: 92, Isotope: 238, Bracket: true}},
		{"[2H+]", Atom{Symbol: "H", Number: 1, Charge: 1, Isotope: 2, Bracket: true}},
		{"[*]", Atom{Symbol: "*", Isotope: NoIsotope, Bracket: true}},
		{"[Cl-]", Atom{Symbol: "Cl", Number: 17, Charge: -1, Isotope: NoIsotope, Bracket: true}},
		{"[Og]", Atom{Symbol: "Og", Number: 118, Isotope: NoIsotope, Bracket: true}},
		{"[C@TB20](F)(Cl)(Br)(I)N", Atom{Symbol: "C", Number: 6, Isotope: NoIsotope, Bracket: true}},
		{"[C@OH30H](F)(Cl)(Br)(I)N", Atom{Symbol: "C", Number: 6, HCount: 1, Isotope: NoIsotope, Bracket: true}},
		{"[C@SP3H2]", Atom{Symbol: "C", Number: 6, HCount: 2, Isotope: NoIsotope, Bracket: true}},
		{"S", Atom{Symbol: "S", Number: 16, HCount: 2, Isotope: NoIsotope}},
		{"Cl", Atom{Symbol: "Cl", Number: 17, HCount: 1, Isotope: NoIsotope}},
		{"c1ccccc1", Atom{Symbol: "C", Number: 6, HCount: 1, Aromatic: true, Isotope: NoIsotope}},
	} {
		m := mustParse(t, c.smiles)
		if got := m.Atoms[0]; got != c.want {
			t.Errorf("%s: atom %+v, want %+v", c.smiles, got, c.want)
		}
	}
	m := mustParse(t, "CC[NH3+]")
	if p := m.Atoms[2].Pos; p != 2 {
		t.Errorf("CC[NH3+]: the bracket atom at byte %d, want 2", p)
	}
}

func TestBondOrders(t *testing.T) {
	for _, c := range []struct {
		smiles string
		want   []BondOrder
	}{
		{"CC", []BondOrder{Single}},
		{"C-C", []BondOrder{Single}},
		{"C=C", []BondOrder{Double}},
		{"C#C", []BondOrder{Triple}},
		{"[Rh-](Cl)(Cl)(Cl)(Cl)$[Rh-](Cl)(Cl)(Cl)Cl", []BondOrder{Single, Single, Single, Single, Quadruple, Single, Single, Single, Single}},
		{"C:C", []BondOrder{Aromatic}},
		{"F/C=C\\F", []BondOrder{Single, Double, Single}},
		{"cc", []BondOrder{Aromatic}},
		{"cC", []BondOrder{Single}},
		{"c-c", []BondOrder{Single}},
		{"c=c", []BondOrder{Double}},
		{"c1ccccc1", []BondOrder{Aromatic, Aromatic, Aromatic, Aromatic, Aromatic, Aromatic}},
		{"c1ccccc1-c1ccccc1", []BondOrder{Aromatic, Aromatic, Aromatic, Aromatic, Aromatic, Aromatic, Single,
			Aromatic, Aromatic, Aromatic, Aromatic, Aromatic, Aromatic}},
		{"C=1CCC1", []BondOrder{Single, Single, Single, Double}},
		{"C1CCC=1", []BondOrder{Single, Single, Single, Double}},
		{"C=1CCC=1", []BondOrder{Single, Single, Single, Double}},
		{"C/1CCC\\1", []BondOrder{Single, Single, Single, Single}},
		{"c1cccC1", []BondOrder{Aromatic, Aromatic, Aromatic, Single, Single}},
		{"C(=O)O", []BondOrder{Double, Single}},
		{"C.C", nil},
	} {
		m := mustParse(t, c.smiles)
		got := make([]BondOrder, len(m.Bonds))
		for i, b := range m.Bonds {
			got[i] = b.Order
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: bonds %v, want %v", c.smiles, got, c.want)
		}
	}
	// the endpoints: chain, branch and ring bonds
	m := mustParse(t, "CC(O)C1CC1")
	want := []Bond{{0, 1, Single}, {1, 2, Single}, {1, 3, Single}, {3, 4, Single}, {4, 5, Single}, {3, 5, Single}}
	if !slices.Equal(m.Bonds, want) {
		t.Errorf("CC(O)C1CC1: bonds %v, want %v", m.Bonds, want)
	}
	if s := Aromatic.String() + " " + Quadruple.String() + " " + BondOrder(9).String(); s != "aromatic quadruple BondOrder(9)" {
		t.Errorf("BondOrder.String: %s", s)
	}
}

// errorCases are SMILES that Parse refuses: the byte and a part of the
// message it must give.
var errorCases = []struct {
	smiles string
	pos    int
	msg    string
}{
	{"", 0, "empty SMILES"},
	{"C1CC", 1, "unclosed ring: ring bond 1 is never closed"},
	{"C1CC2CC", 1, "unclosed ring: ring bond 1"},
	{"C(C", 1, "unbalanced parenthesis: '(' is never closed"},
	{"CC)", 2, "unbalanced parenthesis: ')' with no '('"},
	{"C()", 2, "empty branch"},
	{"C((C))", 2, "'(' right after '('"},
	{"(C)C", 0, "branch '(' with no atom before it"},
	{"[Xx]", 1, `unknown element "Xx"`},
	{"[Q]", 1, `unknown element "Q"`},
	{"CXC", 1, `unknown element "X"`},
	{"Cx", 1, `unknown element "x"`},
	{"Ca", 0, "element Ca must be written in brackets ([Ca])"},
	{"NaCl", 0, "element Na must be written in brackets ([Na])"},
	{"CSi", 1, "element Si must be written in brackets"},
	{"K", 0, "element K must be written in brackets"},
	{"H", 0, "element H must be written in brackets"},
	{"CZn", 1, "element Zn must be written in brackets"},
	{"se1cccc1", 0, "aromatic se must be written in brackets ([se])"},
	{"[ca]", 1, `unknown aromatic element "ca"`},
	{"[x]", 1, `unknown aromatic element "x"`},
	{"[Na", 0, "unclosed bracket"},
	{"C[Na+.[Cl-]", 5, `unexpected "." in bracket atom "[Na+.[Cl-]"`},
	{"[]", 1, "bracket atom without an element symbol"},
	{"[+]", 1, "bracket atom without an element symbol"},
	{"C=", 1, "bond '=' to nothing: the SMILES ends after it"},
	{"=C", 0, "bond '=' to nothing: no atom before it"},
	{"C=(C)C", 1, "bond '=' to nothing: '(' follows it"},
	{"C(=)C", 2, "bond '=' to nothing: ')' follows it"},
	{"C=.C", 1, "bond '=' to nothing: '.' follows it"},
	{"C.=C", 2, "bond '=' right after '.'"},
	{"C==C", 2, "two bond symbols in a row: '=' at byte 1, then '='"},
	{"C11", 2, "ring closure 1 joins an atom to itself"},
	{"C%11%11", 4, "ring closure %11 joins an atom to itself"},
	{"C12CCCCC12", 9, "ring closure 2 duplicates a bond"},
	{"C1C1", 3, "ring closure 1 duplicates a bond: the atoms at bytes 0 and 2 are already bonded"},
	{"C=1CCCCC#1", 8, "ring bond 1 is '#' here but '=' where it opened (byte 1)"},
	{"C-1CCCCC=1", 8, "ring bond 1 is '=' here but '-'"},
	{"C%1", 1, "'%' must be followed by two digits"},
	{"C%1C", 1, "'%' must be followed by two digits"},
	{"1CC1", 0, "ring-closure 1 with no atom before it"},
	{"C(1CC)", 2, "ring-closure 1 right after '('"},
	{"C(C)1CC1", 4, "ring-closure 1 after a branch"},
	{"C.1CC1", 2, "ring-closure 1 right after '.'"},
	{".C", 0, "'.' with no atom before it"},
	{"C.", 1, "'.' to nothing: the SMILES ends after it"},
	{"C..C", 2, "two '.' in a row"},
	{"C(C.)C", 3, "'.' to nothing: ')' follows it"},
	{"C.(C)", 2, "'(' right after '.'"},
	{"[HH1]", 2, "a hydrogen atom cannot have a hydrogen count"},
	{"[C+16]", 2, "charge +16 outside -15 to +15"},
	{"[C----------------]", 2, "charge -16 outside -15 to +15"},
	{"[C+123]", 2, "charge +123 of more than 2 digits"},
	{"[1234C]", 1, "isotope of 4 digits"},
	{"[C@TH3]", 2, "chirality @TH3: @TH takes a number from 1 to 2"},
	{"[C@OH31]", 2, "@OH takes a number from 1 to 30"},
	{"[C@TB]", 2, "chirality @TB: @TB takes a number"},
	{"[C:]", 2, "atom class ':' without a number"},
	{"[C:1234567890]", 2, "atom class of 10 digits"},
	{"[CH4x]", 4, `unexpected "x" in bracket atom "[CH4x]"`},
	{"[CH12]", 4, `unexpected "2" in bracket atom`},
	{"[C@@@H]", 4, `unexpected "@" in bracket atom`},
	{"[C-+]", 3, `unexpected "+" in bracket atom`},
	{"C C", 1, "whitespace"},
	{"CCO\tethanol", 3, "whitespace"},
	{"C?C", 1, `unexpected character "?"`},
	{"C\xffC", 1, `unexpected character "\xff"`},
}

func TestParseErrors(t *testing.T) {
	for _, c := range errorCases {
		m, err := Parse(c.smiles)
		if err == nil {
			t.Errorf("%q: no error (%d atoms)", c.smiles, len(m.Atoms))
			continue
		}
		if m != nil {
			t.Errorf("%q: a molecule and an error", c.smiles)
		}
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: error %T %v is not a *SyntaxError", c.smiles, err, err)
			continue
		}
		if se.Pos != c.pos || !strings.Contains(se.Msg, c.msg) || se.SMILES != c.smiles {
			t.Errorf("%q: error at byte %d %q, want byte %d %q", c.smiles, se.Pos, se.Msg, c.pos, c.msg)
		}
		if want := "byte " + itoa(c.pos) + ": "; !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v does not name %q", c.smiles, err, want)
		}
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + itoa(n%10)
}

func TestSyntaxErrorExcerpt(t *testing.T) {
	long := strings.Repeat("C", 100) + "(" + strings.Repeat("C", 100)
	_, err := Parse(long)
	want := `molecules: SMILES ..."` + strings.Repeat("C", 25) + "(" + strings.Repeat("C", 24) + `"...: byte 100: unbalanced parenthesis`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %v, want it to start %s", err, want)
	}
	_, err = Parse("C1CC")
	if want := `molecules: SMILES "C1CC": byte 1: unclosed ring: ring bond 1 is never closed`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

// TestParseLimits: deep branches, many rings and long chains (the sizes
// OpenSMILES asks a parser to accept) parse.
func TestParseLimits(t *testing.T) {
	deep := strings.Repeat("C(", 1000) + "C" + strings.Repeat(")", 1000)
	if m := mustParse(t, deep); len(m.Atoms) != 1001 || len(m.Bonds) != 1000 {
		t.Errorf("1000 nested branches: %d atoms, %d bonds", len(m.Atoms), len(m.Bonds))
	}
	rings := strings.Repeat("C1CC1", 1000) // 1000 rings, number 1 reused
	if m := mustParse(t, rings); len(m.Atoms) != 3000 || len(m.Bonds) != 3999 {
		t.Errorf("1000 rings: %d atoms, %d bonds", len(m.Atoms), len(m.Bonds))
	}
	var b strings.Builder
	b.WriteString("C")
	for n := 10; n < 100; n++ {
		b.WriteString("%" + itoa(n))
	}
	b.WriteString("C") // the atoms closing the rings are not bonded to the first
	for n := 10; n < 100; n++ {
		b.WriteString("C%" + itoa(n))
	}
	if m := mustParse(t, b.String()); len(m.Atoms) != 92 || len(m.Bonds) != 91+90 {
		t.Errorf("90 open ring bonds: %d atoms, %d bonds", len(m.Atoms), len(m.Bonds))
	}
}
