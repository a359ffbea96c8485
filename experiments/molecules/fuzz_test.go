package molecules

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/experiments/graphdata"
)

// FuzzParse parses arbitrary strings (seeded with the SMILES of the sample,
// the known molecules and the error cases) and checks that Parse returns
// either a *SyntaxError at a byte of the string or a well-formed molecule:
// bonds between distinct existing atoms, no pair bonded twice, hydrogen
// counts >= 0, a graph with the same bonds and features in range.
func FuzzParse(f *testing.F) {
	data, err := os.ReadFile(samplePath)
	if err != nil {
		f.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if smiles, _, ok := strings.Cut(line, ","); ok && !strings.HasPrefix(line, "#") {
			f.Add(smiles)
		}
	}
	for _, c := range errorCases {
		f.Add(c.smiles)
	}
	for _, s := range []string{"Cn1cnc2c1c(=O)n(C)c(=O)n2C", "c1cc[nH]c1", "[13C@@H](F)(Cl)Br", "C%10CCCCC%10", "[Na+].[Cl-]", nested} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := Parse(s)
		if err != nil {
			var se *SyntaxError
			if m != nil || !errors.As(err, &se) || se.Pos < 0 || se.Pos > len(s) || se.SMILES != s || se.Msg == "" {
				t.Fatalf("%q: molecule %v, error %v", s, m != nil, err)
			}
			return
		}
		if len(m.Atoms) == 0 || m.SMILES != s {
			t.Fatalf("%q: %d atoms, SMILES %q", s, len(m.Atoms), m.SMILES)
		}
		seen := map[[2]int]bool{}
		for _, b := range m.Bonds {
			if b.A < 0 || b.B < 0 || b.A >= len(m.Atoms) || b.B >= len(m.Atoms) || b.A == b.B || BondFeature(b.Order) < 0 {
				t.Fatalf("%q: bond %+v", s, b)
			}
			k := [2]int{min(b.A, b.B), max(b.A, b.B)}
			if seen[k] {
				t.Fatalf("%q: atoms %v bonded twice", s, k)
			}
			seen[k] = true
		}
		for i, a := range m.Atoms {
			if a.HCount < 0 || a.Pos < 0 || a.Pos >= len(s) || (i > 0 && a.Pos <= m.Atoms[i-1].Pos) {
				t.Fatalf("%q: atom %d %+v", s, i, a)
			}
		}
		if len(m.Atoms) > graphdata.MaxGraphNodes {
			return
		}
		g, err := m.ToGraph()
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if g.Graph.NumEdges() != len(m.Bonds) || len(g.Atoms) != len(m.Atoms) {
			t.Fatalf("%q: %d edges for %d bonds", s, g.Graph.NumEdges(), len(m.Bonds))
		}
		for _, x := range g.Atoms {
			if x < 0 || x >= NumAtomFeatures {
				t.Fatalf("%q: atom feature %d", s, x)
			}
		}
		for _, x := range g.Bonds {
			if x < 0 || x >= NumBondFeatures {
				t.Fatalf("%q: bond feature %d", s, x)
			}
		}
	})
}
