package molecules

import (
	"fmt"
	"slices"
	"strings"
)

// HeavyAtoms returns the number of atoms that are not hydrogen (a
// wildcard '*' counts as heavy).
func (m *Molecule) HeavyAtoms() int {
	return m.count(func(a Atom) bool { return a.Number != 1 })
}

// count returns the number of atoms for which f is true.
func (m *Molecule) count(f func(Atom) bool) int {
	n := 0
	for _, a := range m.Atoms {
		if f(a) {
			n++
		}
	}
	return n
}

// NumHydrogens returns the number of hydrogens: the HCount of every atom
// plus the hydrogens written as atoms ([H]).
func (m *Molecule) NumHydrogens() int {
	n := m.count(func(a Atom) bool { return a.Number == 1 })
	for _, a := range m.Atoms {
		n += a.HCount
	}
	return n
}

// AromaticAtoms returns the number of atoms written as aromatic.
func (m *Molecule) AromaticAtoms() int {
	return m.count(func(a Atom) bool { return a.Aromatic })
}

// Charge returns the sum of the formal charges.
func (m *Molecule) Charge() int {
	q := 0
	for _, a := range m.Atoms {
		q += a.Charge
	}
	return q
}

// Formula returns the molecular formula in Hill order (C, then H, then
// the other elements alphabetically; all alphabetically when there is no
// carbon), isotopes counted as their element, followed by the net charge
// ("+", "-2") and by "*" and their count (if more than one) for wildcard
// atoms, as RDKit's CalcMolFormula writes it: caffeine
// "C8H10N4O2", [NH4+] "H4N+", [Na+].[Cl-] "ClNa".
func (m *Molecule) Formula() string {
	count := map[string]int{}
	for _, a := range m.Atoms {
		count[a.Symbol]++
		if a.HCount > 0 {
			count["H"] += a.HCount
		}
	}
	wild := count["*"]
	delete(count, "*")
	var order []string
	for s := range count {
		order = append(order, s)
	}
	slices.Sort(order)
	if count["C"] > 0 {
		order = slices.DeleteFunc(order, func(s string) bool { return s == "C" || s == "H" })
		if count["H"] > 0 {
			order = append([]string{"H"}, order...)
		}
		order = append([]string{"C"}, order...)
	}
	var b strings.Builder
	for _, s := range order {
		b.WriteString(s)
		if count[s] > 1 {
			fmt.Fprint(&b, count[s])
		}
	}
	switch q := m.Charge(); {
	case q == 1:
		b.WriteString("+")
	case q == -1:
		b.WriteString("-")
	case q != 0:
		fmt.Fprintf(&b, "%+d", q)
	}
	switch {
	case wild == 1:
		b.WriteString("*")
	case wild > 1:
		fmt.Fprintf(&b, "*%d", wild)
	}
	return b.String()
}
