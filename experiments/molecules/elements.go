package molecules

// elementSymbols lists the 118 element symbols by atomic number:
// elementSymbols[z-1] is the symbol of element z.
var elementSymbols = [...]string{
	"H", "He",
	"Li", "Be", "B", "C", "N", "O", "F", "Ne",
	"Na", "Mg", "Al", "Si", "P", "S", "Cl", "Ar",
	"K", "Ca", "Sc", "Ti", "V", "Cr", "Mn", "Fe", "Co", "Ni", "Cu", "Zn", "Ga", "Ge", "As", "Se", "Br", "Kr",
	"Rb", "Sr", "Y", "Zr", "Nb", "Mo", "Tc", "Ru", "Rh", "Pd", "Ag", "Cd", "In", "Sn", "Sb", "Te", "I", "Xe",
	"Cs", "Ba",
	"La", "Ce", "Pr", "Nd", "Pm", "Sm", "Eu", "Gd", "Tb", "Dy", "Ho", "Er", "Tm", "Yb", "Lu",
	"Hf", "Ta", "W", "Re", "Os", "Ir", "Pt", "Au", "Hg", "Tl", "Pb", "Bi", "Po", "At", "Rn",
	"Fr", "Ra",
	"Ac", "Th", "Pa", "U", "Np", "Pu", "Am", "Cm", "Bk", "Cf", "Es", "Fm", "Md", "No", "Lr",
	"Rf", "Db", "Sg", "Bh", "Hs", "Mt", "Ds", "Rg", "Cn", "Nh", "Fl", "Mc", "Lv", "Ts", "Og",
}

// atomicNumbers maps an element symbol to its atomic number.
var atomicNumbers = func() map[string]int {
	m := make(map[string]int, len(elementSymbols))
	for i, s := range elementSymbols {
		m[s] = i + 1
	}
	return m
}()

// AtomicNumber returns the atomic number of an element symbol as
// capitalised in SMILES ("C", "Cl", "Fe"), and false for anything else.
func AtomicNumber(symbol string) (int, bool) {
	z, ok := atomicNumbers[symbol]
	return z, ok
}

// normalValences are the OpenSMILES normal valences of the organic
// subset, in increasing order: an unbracketed atom gets implicit
// hydrogens up to the lowest of them that is >= its bond order sum.
var normalValences = map[string][]int{
	"B": {3}, "C": {4}, "N": {3, 5}, "O": {2}, "P": {3, 5}, "S": {2, 4, 6},
	"F": {1}, "Cl": {1}, "Br": {1}, "I": {1},
}

// aromaticSymbols maps the lowercase aromatic symbols to their elements:
// b c n o p s may stand unbracketed (the aromatic organic subset); se and
// as only in brackets.
var aromaticSymbols = map[string]string{
	"b": "B", "c": "C", "n": "N", "o": "O", "p": "P", "s": "S", "se": "Se", "as": "As",
}
