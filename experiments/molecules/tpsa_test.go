package molecules

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const (
	samplePath    = "testdata/sample.csv"
	referencePath = "testdata/sample_rdkit.tsv"
	sampleRecords = 56
)

// rdkitRow is RDKit's view of one SMILES (testdata/sample_rdkit.tsv,
// written by testdata/rdkit_reference.py).
type rdkitRow struct {
	heavy, bonds int
	formula      string
	// aromatic is RDKit's number of aromatic atoms in its own SMILES
	// aromaticSMILES, -1 (and "") where RDKit cannot sanitize the molecule.
	aromatic       int
	aromaticSMILES string
}

// loadReference returns the rows of testdata/sample_rdkit.tsv by SMILES.
func loadReference(t *testing.T) map[string]rdkitRow {
	t.Helper()
	data, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	ref := map[string]rdkitRow{}
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 6 {
			t.Fatalf("%s: %d fields in %q", referencePath, len(f), line)
		}
		r := rdkitRow{formula: f[3], aromatic: -1, aromaticSMILES: f[5]}
		r.heavy, _ = strconv.Atoi(f[1])
		r.bonds, _ = strconv.Atoi(f[2])
		if f[4] != "" {
			r.aromatic, _ = strconv.Atoi(f[4])
		}
		ref[f[0]] = r
	}
	return ref
}

// formulaCounts returns the element counts of a formula and its charge
// ("q+2"), so that RDKit's order (H first without carbon) and Hill's
// compare equal.
func formulaCounts(f string) map[string]int {
	m := map[string]int{}
	for _, g := range regexp.MustCompile(`([A-Z][a-z]?|\*)(\d*)|([+-]\d*)$`).FindAllStringSubmatch(f, -1) {
		if g[3] != "" {
			m["q"+g[3]]++
			continue
		}
		n := 1
		if g[2] != "" {
			n, _ = strconv.Atoi(g[2])
		}
		m[g[1]] += n
	}
	return m
}

// checkAgainstRDKit compares a parsed molecule with RDKit's row: heavy
// atoms, bonds and formula (so every atom's element, charge and the
// hydrogens in all); then RDKit's aromatic SMILES of it, which must give
// the same formula, bonds and RDKit's number of aromatic atoms.
func checkAgainstRDKit(t *testing.T, m *Molecule, r rdkitRow) {
	t.Helper()
	if m.HeavyAtoms() != r.heavy || len(m.Bonds) != r.bonds || !maps.Equal(formulaCounts(m.Formula()), formulaCounts(r.formula)) {
		t.Errorf("%s: %d heavy atoms, %d bonds, %s; RDKit %d, %d, %s", m.SMILES, m.HeavyAtoms(), len(m.Bonds), m.Formula(), r.heavy, r.bonds, r.formula)
	}
	if r.aromatic < 0 {
		return
	}
	a, err := Parse(r.aromaticSMILES)
	if err != nil {
		t.Errorf("RDKit's SMILES of %s: %v", m.SMILES, err)
		return
	}
	if a.HeavyAtoms() != r.heavy || len(a.Bonds) != r.bonds || a.AromaticAtoms() != r.aromatic || !maps.Equal(formulaCounts(a.Formula()), formulaCounts(r.formula)) {
		t.Errorf("%s (RDKit's SMILES of %s): %d heavy atoms, %d bonds, %d aromatic, %s; RDKit %d, %d, %d, %s",
			a.SMILES, m.SMILES, a.HeavyAtoms(), len(a.Bonds), a.AromaticAtoms(), a.Formula(), r.heavy, r.bonds, r.aromatic, r.formula)
	}
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// checkSet checks what every loaded set must satisfy: the hash, the
// records' lines, and that each molecule converts to a graph with one
// feature per atom and bond.
func checkSet(t *testing.T, set *TPSASet, path string) {
	t.Helper()
	if set.SHA256 != fileSHA256(t, path) || set.Path != path {
		t.Errorf("%s: path %s, SHA-256 %s", path, set.Path, set.SHA256)
	}
	for i, r := range set.Records {
		if i > 0 && r.Line <= set.Records[i-1].Line {
			t.Fatalf("record %d at line %d after line %d", i, r.Line, set.Records[i-1].Line)
		}
		g, err := r.Molecule.ToGraph()
		if err != nil {
			t.Fatalf("line %d: %v", r.Line, err)
		}
		if len(g.Atoms) != len(r.Molecule.Atoms) || len(g.Bonds) != len(r.Molecule.Bonds) {
			t.Fatalf("line %d: %d atom and %d bond features", r.Line, len(g.Atoms), len(g.Bonds))
		}
	}
}

// TestSample loads the committed sample and compares every molecule with
// RDKit's reference.
func TestSample(t *testing.T) {
	set, err := LoadTPSA(samplePath)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Records) != sampleRecords {
		t.Fatalf("%d records, want %d", len(set.Records), sampleRecords)
	}
	checkSet(t, set, samplePath)
	ref := loadReference(t)
	if len(ref) != sampleRecords {
		t.Fatalf("%d reference rows, want %d", len(ref), sampleRecords)
	}
	for _, r := range set.Records {
		row, ok := ref[r.Molecule.SMILES]
		if !ok {
			t.Fatalf("line %d: %s is not in %s", r.Line, r.Molecule.SMILES, referencePath)
		}
		checkAgainstRDKit(t, r.Molecule, row)
	}
	first := set.Records[0]
	if first.Line != 3 || first.Molecule.SMILES != "CC1=CC(=O)C=CC1=O" || first.TPSA != 34.14 || first.Molecule.HeavyAtoms() != 9 {
		t.Errorf("first record: line %d %s %v", first.Line, first.Molecule.SMILES, first.TPSA)
	}
}

// TestDebianFile parses the whole TPSA file of rdkit-data, if installed.
func TestDebianFile(t *testing.T) {
	if _, err := os.Stat(DefaultTPSAPath); err != nil {
		t.Skipf("%s: %v (Debian's rdkit-data: scripts/install-data.sh rdkit-data)", DefaultTPSAPath, err)
	}
	set, err := LoadTPSA("")
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Records) != 4999 {
		t.Errorf("%d records, want 4999", len(set.Records))
	}
	checkSet(t, set, DefaultTPSAPath)
	// the sample's lines are the file's
	ref := loadReference(t)
	found := 0
	for _, r := range set.Records {
		if row, ok := ref[r.Molecule.SMILES]; ok {
			found++
			checkAgainstRDKit(t, r.Molecule, row)
		}
	}
	if found < sampleRecords {
		t.Errorf("%d of the %d sample molecules in the file", found, sampleRecords)
	}
	// totals over the file, from RDKit 2022.09.3 (rdkit_reference.py's
	// counts on every line): any molecule parsed differently changes them
	var heavy, bonds, hydrogens int
	for _, r := range set.Records {
		heavy += r.Molecule.HeavyAtoms()
		bonds += len(r.Molecule.Bonds)
		hydrogens += r.Molecule.NumHydrogens()
	}
	if heavy != 82157 || bonds != 84488 || hydrogens != 76063 {
		t.Errorf("%d heavy atoms, %d bonds, %d hydrogens; RDKit 82157, 84488, 76063", heavy, bonds, hydrogens)
	}
	sizes := set.HeavyAtoms()
	if lo, hi := slices.Min(sizes), slices.Max(sizes); lo != 2 || hi != 122 {
		t.Errorf("heavy atoms from %d to %d, want 2 to 122", lo, hi)
	}
}

func TestLoadTPSAMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "first_5k.tpsa.csv")
	_, err := LoadTPSA(path)
	if err == nil {
		t.Fatal("no error")
	}
	for _, s := range []string{path, "rdkit-data", "scripts/install-data.sh"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
	if _, err := LoadTPSA(t.TempDir()); err == nil || strings.Contains(err.Error(), "rdkit-data") {
		t.Errorf("a directory: error %v", err)
	}
}

func TestParseTPSA(t *testing.T) {
	recs, err := ParseTPSA([]byte("# comment\r\nC,0\r\n\nCCO,20.23\n"), "x.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Line != 2 || recs[1].Line != 4 || recs[1].TPSA != 20.23 || recs[1].Molecule.SMILES != "CCO" {
		t.Errorf("records %+v", recs)
	}
	for _, c := range []struct{ data, msg string }{
		{"C\n", "x.csv:1: want two fields"},
		{"C,1,2\n", "x.csv:1: want two fields"},
		{"#\nC,abc\n", `x.csv:2: TPSA "abc" is not a number`},
		{"C,-1\n", "x.csv:1: TPSA \"-1\""},
		{"C,NaN\n", "x.csv:1: TPSA \"NaN\""},
		{"C,+Inf\n", "x.csv:1: TPSA \"+Inf\""},
		{"C,0\nC1CC,3\n", `x.csv:2: molecules: SMILES "C1CC": byte 1: unclosed ring`},
		{"# nothing\n", "x.csv has no records"},
	} {
		_, err := ParseTPSA([]byte(c.data), "x.csv")
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: error %v, want %q", c.data, err, c.msg)
		}
	}
	_, err = ParseTPSA([]byte("C(,1\n"), "x.csv")
	var se *SyntaxError
	if !errors.As(err, &se) || se.Pos != 1 {
		t.Errorf("bad SMILES: error %v is not a *SyntaxError at byte 1", err)
	}
}

func TestSplitBySize(t *testing.T) {
	sizes := []int{5, 3, 9, 3, 7, 9, 1, 5, 9, 2}
	// by (size, index): 6(1) 9(2) 1(3) 3(3) 0(5) 7(5) 4(7) 2(9) 5(9) 8(9)
	for _, c := range []struct {
		pct               float64
		train, test       []int
		maxTrain, minTest int
	}{
		{30, []int{0, 1, 3, 4, 6, 7, 9}, []int{2, 5, 8}, 7, 9},
		{20, []int{0, 1, 2, 3, 4, 6, 7, 9}, []int{5, 8}, 9, 9}, // the 9s straddle the cut: the later ones are tested
		{50, []int{0, 1, 3, 6, 9}, []int{2, 4, 5, 7, 8}, 5, 5},
		{10, []int{0, 1, 2, 3, 4, 5, 6, 7, 9}, []int{8}, 9, 9},
		{90, []int{6}, []int{0, 1, 2, 3, 4, 5, 7, 8, 9}, 1, 2},
		{14.9, []int{0, 1, 2, 3, 4, 5, 6, 7, 9}, []int{8}, 9, 9}, // 1.49 rounds to 1
		{15, []int{0, 1, 2, 3, 4, 6, 7, 9}, []int{5, 8}, 9, 9},   // 1.5 rounds to 2
	} {
		sp, err := SplitBySize(sizes, c.pct)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(sp.Train, c.train) || !slices.Equal(sp.Test, c.test) || sp.MaxTrain != c.maxTrain || sp.MinTest != c.minTest {
			t.Errorf("%v%%: train %v test %v (max %d, min %d), want %v %v (%d, %d)",
				c.pct, sp.Train, sp.Test, sp.MaxTrain, sp.MinTest, c.train, c.test, c.maxTrain, c.minTest)
		}
	}
	for _, c := range []struct {
		sizes []int
		pct   float64
		msg   string
	}{
		{sizes, 0, "outside (0, 100)"},
		{sizes, 100, "outside (0, 100)"},
		{sizes, -5, "outside (0, 100)"},
		{[]int{1, -1}, 50, "size -1 of item 1 is negative"},
		{sizes, 4, "is 0 test items"},
		{sizes, 96, "is 10 test items"},
		{nil, 50, "of 0 items"},
	} {
		if _, err := SplitBySize(c.sizes, c.pct); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v %v%%: error %v, want %q", c.sizes, c.pct, err, c.msg)
		}
	}
}

// TestSplitSample: on the sample, the split is the same every time, every
// test molecule is at least as large as every training molecule, and the
// two parts cover the records once.
func TestSplitSample(t *testing.T) {
	set, err := LoadTPSA(samplePath)
	if err != nil {
		t.Fatal(err)
	}
	heavy := set.HeavyAtoms()
	sp, err := SplitBySize(heavy, 20)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := SplitBySize(slices.Clone(heavy), 20)
	if !slices.Equal(sp.Train, again.Train) || !slices.Equal(sp.Test, again.Test) {
		t.Error("two splits differ")
	}
	if len(sp.Test) != 11 || len(sp.Train) != sampleRecords-11 { // round(56 * 0.2) = 11
		t.Errorf("%d train, %d test", len(sp.Train), len(sp.Test))
	}
	all := append(slices.Clone(sp.Train), sp.Test...)
	slices.Sort(all)
	for i, x := range all {
		if x != i {
			t.Fatalf("train and test %v do not cover 0..%d once", all, len(heavy)-1)
		}
	}
	for _, i := range sp.Train {
		for _, j := range sp.Test {
			if heavy[i] > heavy[j] || heavy[i] == heavy[j] && i > j {
				t.Errorf("train %d (%d atoms) after test %d (%d atoms)", i, heavy[i], j, heavy[j])
			}
		}
	}
	if sp.MaxTrain != slices.Max(pick(heavy, sp.Train)) || sp.MinTest != slices.Min(pick(heavy, sp.Test)) {
		t.Errorf("max train %d, min test %d", sp.MaxTrain, sp.MinTest)
	}
}

func pick(x, idx []int) []int {
	out := make([]int, len(idx))
	for i, j := range idx {
		out[i] = x[j]
	}
	return out
}
