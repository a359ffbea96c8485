package molecules_test

import (
	"fmt"

	"github.com/rpe-go/rpe/experiments/molecules"
)

func Example() {
	m, err := molecules.Parse("Cn1cnc2c1c(=O)n(C)c(=O)n2C") // caffeine
	if err != nil {
		panic(err)
	}
	fmt.Println(m.Formula(), m.HeavyAtoms(), "heavy atoms,", len(m.Bonds), "bonds,", m.AromaticAtoms(), "aromatic")
	g, err := m.ToGraph()
	if err != nil {
		panic(err)
	}
	f, _ := molecules.DecodeAtomFeature(g.Atoms[2])
	fmt.Printf("atom 2: %s, aromatic %v, %d H: feature %d = %+v\n",
		m.Atoms[2].Symbol, m.Atoms[2].Aromatic, m.Atoms[2].HCount, g.Atoms[2], f)
	fmt.Println("edge", g.Edges[0], "bond feature", g.Bonds[0], "of", molecules.NumBondFeatures)

	_, err = molecules.Parse("C1CC(=O")
	fmt.Println(err)

	sp, err := molecules.SplitBySize([]int{12, 30, 7, 30, 18}, 40)
	if err != nil {
		panic(err)
	}
	fmt.Println("train", sp.Train, "test", sp.Test)
	// Output:
	// C8H10N4O2 14 heavy atoms, 15 bonds, 9 aromatic
	// atom 2: C, aromatic true, 1 H: feature 36 = {Element:0 Aromatic:1 Charge:2 H:1}
	// edge [0 1] bond feature 0 of 5
	// molecules: SMILES "C1CC(=O": byte 4: unbalanced parenthesis: '(' is never closed
	// train [0 2 4] test [1 3]
}
