package molecules

import (
	"fmt"
	"strings"
)

// BondOrder is the type of a bond: Single, Double, Triple, Quadruple or
// Aromatic.
type BondOrder uint8

// The bond orders. A directional bond ('/' or '\') is Single.
const (
	Single    BondOrder = 1 // '-', '/', '\', or no symbol between atoms that are not both aromatic
	Double    BondOrder = 2 // '='
	Triple    BondOrder = 3 // '#'
	Quadruple BondOrder = 4 // '$'
	Aromatic  BondOrder = 5 // ':', or no symbol between two aromatic atoms
)

// String returns "single", "double", "triple", "quadruple" or "aromatic".
func (o BondOrder) String() string {
	switch o {
	case Single:
		return "single"
	case Double:
		return "double"
	case Triple:
		return "triple"
	case Quadruple:
		return "quadruple"
	case Aromatic:
		return "aromatic"
	}
	return fmt.Sprintf("BondOrder(%d)", uint8(o))
}

// valence is the bond's part of its atoms' bond order sums, from which the
// implicit hydrogens follow: its order, and 1 for an aromatic bond (the
// aromatic atom's share of the pi system is counted by the atom; see
// implicitHydrogens).
func (o BondOrder) valence() int {
	if o == Aromatic {
		return 1
	}
	return int(o)
}

// NoIsotope is Atom.Isotope of an atom written without a mass number
// (the natural isotope mix); [0S] has isotope 0, which is not the same.
const NoIsotope = -1

// Atom is one atom of a Molecule.
type Atom struct {
	// Symbol is the element symbol, capitalised ("C", "Cl", "Fe", also "C"
	// for an aromatic "c"), or "*" for the wildcard atom.
	Symbol string
	// Number is the atomic number (6 for carbon), 0 for "*".
	Number int
	// Aromatic: written in lowercase (c, n, [nH], [se], ...).
	Aromatic bool
	// Charge is the formal charge (bracket atoms only; else 0).
	Charge int
	// HCount is the number of hydrogens the atom carries: the H count of
	// a bracket atom ([NH4+]: 4, [C]: 0), or the implicit hydrogens of an
	// organic-subset atom. Hydrogens written as atoms of their own ([H])
	// are atoms, not part of HCount (Molecule.NumHydrogens counts both).
	HCount int
	// Isotope is the mass number written in brackets ([13C]: 13), or
	// NoIsotope.
	Isotope int
	// Class is the atom class of a bracket atom ([CH4:2]: 2), else 0.
	Class int
	// Bracket: written in square brackets (its HCount is as written).
	Bracket bool
	// Pos is the byte offset of the atom in the SMILES string.
	Pos int
}

// Bond joins atoms A and B (indices into Molecule.Atoms, A != B). A is the
// atom written first.
type Bond struct {
	A, B  int
	Order BondOrder
}

// Molecule is a parsed SMILES string: its atoms in the order they are
// written, and its bonds (each pair of atoms at most once).
type Molecule struct {
	SMILES string
	Atoms  []Atom
	Bonds  []Bond
}

// SyntaxError is the error of Parse: what is wrong, and where.
type SyntaxError struct {
	SMILES string
	// Pos is the byte offset (from 0) of the character that is wrong.
	Pos int
	// Msg says what is wrong ("ring bond 1 is never closed").
	Msg string
}

// Error returns "molecules: SMILES "C1CC": byte 1: ...". A SMILES longer
// than 60 bytes is shown around Pos, with "..." for what is left out.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("molecules: SMILES %s: byte %d: %s", excerpt(e.SMILES, e.Pos), e.Pos, e.Msg)
}

// excerpt quotes s, or the 25 bytes either side of pos when s is long.
func excerpt(s string, pos int) string {
	const half = 25
	if len(s) <= 2*half+10 {
		return fmt.Sprintf("%q", s)
	}
	lo, hi := max(0, pos-half), min(len(s), pos+half)
	out := fmt.Sprintf("%q", s[lo:hi])
	if lo > 0 {
		out = "..." + out
	}
	if hi < len(s) {
		out += "..."
	}
	return out
}

// What came last, for the rules on what may follow.
const (
	lastNone  = iota // start of the string
	lastAtom         // an atom or one of its ring bonds
	lastOpen         // '('
	lastClose        // ')'
	lastDot          // '.'
)

// ringBond is an open ring bond: the atom and the bond symbol (0 if none)
// written with its first digit.
type ringBond struct {
	open        bool
	atom        int
	sym         byte
	pos, symPos int
}

// branch is an open '(': the atom the branch hangs from.
type branch struct{ atom, pos int }

type parser struct {
	s      string
	i      int
	atoms  []Atom
	bonds  []Bond
	bonded map[[2]int]bool
	rings  [100]ringBond
}

// Parse reads one SMILES string (Weininger 1988; the OpenSMILES
// specification): atoms, bonds, branches, ring closures and '.' for
// disconnected parts. The string must be the SMILES alone: whitespace (which
// ends a SMILES in a file) is an error here. Unbracketed atoms of the
// organic subset get their implicit hydrogens. Stereochemistry (@, @@,
// @TH1 ..., '/' and '\') is checked for form and ignored. Any error is a
// *SyntaxError naming the byte and what is wrong; Parse never panics.
func Parse(smiles string) (*Molecule, error) {
	p := &parser{s: smiles, bonded: map[[2]int]bool{}}
	if err := p.parse(); err != nil {
		return nil, err
	}
	p.implicitHydrogens()
	return &Molecule{SMILES: smiles, Atoms: p.atoms, Bonds: p.bonds}, nil
}

func (p *parser) errorf(pos int, format string, args ...any) error {
	return &SyntaxError{SMILES: p.s, Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

func isBondSymbol(c byte) bool { return strings.IndexByte(`-=#$:/\`, c) >= 0 }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isLower(c byte) bool { return c >= 'a' && c <= 'z' }

func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }

// symbolOrder is the order of an explicit bond symbol (0: none written).
func symbolOrder(c byte) BondOrder {
	switch c {
	case '=':
		return Double
	case '#':
		return Triple
	case '$':
		return Quadruple
	case ':':
		return Aromatic
	}
	return Single
}

func (p *parser) parse() error {
	if p.s == "" {
		return p.errorf(0, "empty SMILES")
	}
	prev := -1 // the atom the next atom bonds to; -1 at the start and after '.'
	last := lastNone
	var bondSym byte // the bond symbol waiting for its second atom, 0 if none
	bondPos, dotPos := 0, 0
	var branches []branch
	// dangling is the error for the waiting bond symbol when what follows
	// it is not an atom or a ring closure
	dangling := func(what string) error {
		return p.errorf(bondPos, "bond '%c' to nothing: %s", bondSym, what)
	}
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case isUpper(c) || isLower(c) || c == '[' || c == '*':
			a, err := p.atom()
			if err != nil {
				return err
			}
			idx := len(p.atoms)
			p.atoms = append(p.atoms, a)
			if prev >= 0 {
				p.addBond(prev, idx, bondSym)
			}
			prev, last, bondSym = idx, lastAtom, 0
		case isDigit(c) || c == '%':
			pos := p.i
			num, err := p.ringNumber()
			if err != nil {
				return err
			}
			label := p.s[pos:p.i]
			switch last {
			case lastNone:
				return p.errorf(pos, "ring-closure %s with no atom before it", label)
			case lastOpen:
				return p.errorf(pos, "ring-closure %s right after '(': a branch starts with an atom or a bond", label)
			case lastClose:
				return p.errorf(pos, "ring-closure %s after a branch: ring bonds are written right after their atom, before its branches", label)
			case lastDot:
				return p.errorf(pos, "ring-closure %s right after '.': a dot cannot stand before a ring bond", label)
			}
			if err := p.ringBond(num, label, prev, bondSym, bondPos, pos); err != nil {
				return err
			}
			bondSym = 0
		case isBondSymbol(c):
			if bondSym != 0 {
				return p.errorf(p.i, "two bond symbols in a row: '%c' at byte %d, then '%c'", bondSym, bondPos, c)
			}
			switch last {
			case lastNone:
				return p.errorf(p.i, "bond '%c' to nothing: no atom before it", c)
			case lastDot:
				return p.errorf(p.i, "bond '%c' right after '.'", c)
			}
			bondSym, bondPos = c, p.i
			p.i++
		case c == '(':
			if bondSym != 0 {
				return dangling("'(' follows it (a branch's bond goes inside the parentheses: C(=O))")
			}
			switch last {
			case lastNone:
				return p.errorf(p.i, "branch '(' with no atom before it")
			case lastOpen:
				return p.errorf(p.i, "'(' right after '(': a branch starts with an atom or a bond")
			case lastDot:
				return p.errorf(p.i, "'(' right after '.'")
			}
			branches = append(branches, branch{atom: prev, pos: p.i})
			last = lastOpen
			p.i++
		case c == ')':
			if len(branches) == 0 {
				return p.errorf(p.i, "unbalanced parenthesis: ')' with no '(' before it")
			}
			if bondSym != 0 {
				return dangling("')' follows it")
			}
			switch last {
			case lastOpen:
				return p.errorf(p.i, "empty branch '()'")
			case lastDot:
				return p.errorf(dotPos, "'.' to nothing: ')' follows it")
			}
			b := branches[len(branches)-1]
			branches = branches[:len(branches)-1]
			prev, last = b.atom, lastClose
			p.i++
		case c == '.':
			if bondSym != 0 {
				return dangling("'.' follows it")
			}
			switch last {
			case lastNone:
				return p.errorf(p.i, "'.' with no atom before it")
			case lastDot:
				return p.errorf(p.i, "two '.' in a row")
			}
			prev, last, dotPos = -1, lastDot, p.i
			p.i++
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return p.errorf(p.i, "whitespace: Parse takes a SMILES alone, without a name or other fields after it")
		default:
			return p.errorf(p.i, "unexpected character %q", p.s[p.i:p.i+1])
		}
	}
	if bondSym != 0 {
		return dangling("the SMILES ends after it")
	}
	if last == lastDot {
		return p.errorf(dotPos, "'.' to nothing: the SMILES ends after it")
	}
	if len(branches) > 0 {
		return p.errorf(branches[len(branches)-1].pos, "unbalanced parenthesis: '(' is never closed")
	}
	first := -1
	for n := range p.rings {
		if r := p.rings[n]; r.open && (first < 0 || r.pos < p.rings[first].pos) {
			first = n
		}
	}
	if first >= 0 {
		r := p.rings[first]
		return p.errorf(r.pos, "unclosed ring: ring bond %d is never closed", first)
	}
	return nil
}

// addBond joins atoms a and b by the bond written sym (0: none written,
// aromatic between aromatic atoms, else single).
func (p *parser) addBond(a, b int, sym byte) {
	order := symbolOrder(sym)
	if sym == 0 && p.atoms[a].Aromatic && p.atoms[b].Aromatic {
		order = Aromatic
	}
	p.bonds = append(p.bonds, Bond{A: a, B: b, Order: order})
	p.bonded[[2]int{min(a, b), max(a, b)}] = true
}

// ringNumber reads a ring-closure number: a digit, or '%' and two digits.
func (p *parser) ringNumber() (int, error) {
	if p.s[p.i] != '%' {
		n := int(p.s[p.i] - '0')
		p.i++
		return n, nil
	}
	if p.i+2 >= len(p.s) || !isDigit(p.s[p.i+1]) || !isDigit(p.s[p.i+2]) {
		return 0, p.errorf(p.i, "'%%' must be followed by two digits (ring-closure numbers 10 to 99 are written %%10 ... %%99)")
	}
	n := int(p.s[p.i+1]-'0')*10 + int(p.s[p.i+2]-'0')
	p.i += 3
	return n, nil
}

// ringBond opens ring bond num at atom, or closes it there.
func (p *parser) ringBond(num int, label string, atom int, sym byte, symPos, pos int) error {
	r := &p.rings[num]
	if !r.open {
		*r = ringBond{open: true, atom: atom, sym: sym, pos: pos, symPos: symPos}
		return nil
	}
	r.open = false
	if r.atom == atom {
		return p.errorf(pos, "ring closure %s joins an atom to itself (opened at byte %d on the same atom)", label, r.pos)
	}
	if sym != 0 && r.sym != 0 && symbolOrder(sym) != symbolOrder(r.sym) {
		return p.errorf(symPos, "ring bond %s is '%c' here but '%c' where it opened (byte %d)", label, sym, r.sym, r.symPos)
	}
	if sym == 0 {
		sym = r.sym
	}
	if p.bonded[[2]int{min(r.atom, atom), max(r.atom, atom)}] {
		return p.errorf(pos, "ring closure %s duplicates a bond: the atoms at bytes %d and %d are already bonded", label, p.atoms[r.atom].Pos, p.atoms[atom].Pos)
	}
	p.addBond(r.atom, atom, sym)
	return nil
}

// atom reads one atom: a bracket atom, '*', or an atom of the organic
// subset.
func (p *parser) atom() (Atom, error) {
	start := p.i
	c := p.s[p.i]
	switch {
	case c == '[':
		return p.bracketAtom()
	case c == '*':
		p.i++
		return Atom{Symbol: "*", Isotope: NoIsotope, Pos: start}, nil
	case isLower(c):
		if p.i+1 < len(p.s) {
			if two := p.s[start : start+2]; aromaticSymbols[two] != "" {
				return Atom{}, p.errorf(start, "aromatic %s must be written in brackets ([%s])", two, two)
			}
		}
		el, ok := aromaticSymbols[p.s[start:start+1]]
		if !ok || normalValences[el] == nil {
			return Atom{}, p.errorf(start, "unknown element %q: outside brackets only B C N O P S F Cl Br I, aromatic b c n o p s and * stand alone", p.s[start:start+1])
		}
		p.i++
		return p.organic(el, true, start), nil
	}
	// uppercase
	one := p.s[start : start+1]
	var two string
	if p.i+1 < len(p.s) && isLower(p.s[p.i+1]) {
		two = p.s[start : start+2]
	}
	if normalValences[one] != nil {
		switch {
		case two == "Cl" || two == "Br":
			p.i += 2
			return p.organic(two, false, start), nil
		case two != "" && aromaticSymbols[two[1:]] == "" && atomicNumbers[two] > 0:
			// "Na", "Si": not an organic atom followed by an aromatic one
			return Atom{}, p.errorf(start, "element %s must be written in brackets ([%s])", two, two)
		}
		p.i++
		return p.organic(one, false, start), nil
	}
	switch {
	case atomicNumbers[two] > 0:
		return Atom{}, p.errorf(start, "element %s must be written in brackets ([%s])", two, two)
	case atomicNumbers[one] > 0:
		return Atom{}, p.errorf(start, "element %s must be written in brackets ([%s])", one, one)
	}
	return Atom{}, p.errorf(start, "unknown element %q", one)
}

func (p *parser) organic(symbol string, aromatic bool, pos int) Atom {
	return Atom{Symbol: symbol, Number: atomicNumbers[symbol], Aromatic: aromatic, Isotope: NoIsotope, Pos: pos}
}

// Chirality classes and their largest number (@TH1, @TH2, ... @OH30).
var chiralClasses = map[string]int{"TH": 2, "AL": 2, "SP": 3, "TB": 20, "OH": 30}

// bracketAtom reads [isotope? symbol chiral? hcount? charge? class?].
func (p *parser) bracketAtom() (Atom, error) {
	start := p.i
	if strings.IndexByte(p.s[start:], ']') < 0 {
		return Atom{}, p.errorf(start, "unclosed bracket: '[' with no ']' after it")
	}
	p.i++
	a := Atom{Bracket: true, Isotope: NoIsotope, Pos: start}
	if n, digits := p.number(); digits > 3 {
		return Atom{}, p.errorf(start+1, "isotope of %d digits (at most 3: 0 to 999)", digits)
	} else if digits > 0 {
		a.Isotope = n
	}
	// symbol
	sp := p.i
	c := p.s[p.i]
	var two string
	if p.i+1 < len(p.s) && isLower(p.s[p.i+1]) {
		two = p.s[p.i : p.i+2]
	}
	switch {
	case c == '*':
		a.Symbol = "*"
		p.i++
	case isLower(c):
		el := aromaticSymbols[two]
		if el != "" {
			p.i += 2
		} else if el = aromaticSymbols[p.s[p.i:p.i+1]]; el != "" && len(two) == 0 {
			p.i++
		} else {
			w := p.s[p.i : p.i+1+len(two)/2]
			return Atom{}, p.errorf(sp, "unknown aromatic element %q (the aromatic symbols are b c n o p s se as)", w)
		}
		a.Symbol, a.Aromatic = el, true
	case isUpper(c):
		switch {
		case atomicNumbers[two] > 0:
			a.Symbol = two
			p.i += 2
		case two != "":
			return Atom{}, p.errorf(sp, "unknown element %q", two)
		case atomicNumbers[p.s[p.i:p.i+1]] > 0:
			a.Symbol = p.s[p.i : p.i+1]
			p.i++
		default:
			return Atom{}, p.errorf(sp, "unknown element %q", p.s[sp:sp+1])
		}
	default:
		return Atom{}, p.errorf(sp, "bracket atom without an element symbol: %q where the symbol should be", p.s[sp:sp+1])
	}
	a.Number = atomicNumbers[a.Symbol]
	// chirality: checked for form, then ignored
	if p.s[p.i] == '@' {
		cp := p.i
		p.i++
		if p.s[p.i] == '@' {
			p.i++
		} else if p.i+1 < len(p.s) && chiralClasses[p.s[p.i:p.i+2]] > 0 {
			class := p.s[p.i : p.i+2]
			p.i += 2
			n, digits := p.number()
			if digits == 0 || digits > 2 || n < 1 || n > chiralClasses[class] {
				return Atom{}, p.errorf(cp, "chirality @%s%s: @%s takes a number from 1 to %d", class, p.s[cp+3:p.i], class, chiralClasses[class])
			}
		}
	}
	// hydrogens
	if p.s[p.i] == 'H' {
		if a.Number == 1 {
			return Atom{}, p.errorf(p.i, "a hydrogen atom cannot have a hydrogen count ([HH] is not allowed; write [H][H])")
		}
		p.i++
		a.HCount = 1
		if isDigit(p.s[p.i]) {
			a.HCount = int(p.s[p.i] - '0')
			p.i++
		}
	}
	// charge: +, -, +n, -n (one or two digits), or repeated signs (++, ---)
	if c := p.s[p.i]; c == '+' || c == '-' {
		cp := p.i
		sign := 1
		if c == '-' {
			sign = -1
		}
		p.i++
		n, digits := p.number()
		switch {
		case digits > 2:
			return Atom{}, p.errorf(cp, "charge %s of more than 2 digits", p.s[cp:p.i])
		case digits == 0:
			n = 1
			for p.s[p.i] == c {
				n++
				p.i++
			}
		}
		if n > 15 {
			return Atom{}, p.errorf(cp, "charge %c%d outside -15 to +15", c, n)
		}
		a.Charge = sign * n
	}
	// atom class
	if p.s[p.i] == ':' {
		cp := p.i
		p.i++
		n, digits := p.number()
		switch {
		case digits == 0:
			return Atom{}, p.errorf(cp, "atom class ':' without a number")
		case digits > 9:
			return Atom{}, p.errorf(cp, "atom class of %d digits (at most 9)", digits)
		}
		a.Class = n
	}
	if p.s[p.i] != ']' {
		return Atom{}, p.errorf(p.i, "unexpected %q in bracket atom %q (its parts, in order: isotope, symbol, chirality, H count, charge, :class)", p.s[p.i:p.i+1], p.s[start:strings.IndexByte(p.s[start:], ']')+start+1])
	}
	p.i++
	return a, nil
}

// number reads a run of digits from p.i: its value (saturated at 1e9) and
// its number of digits.
func (p *parser) number() (n, digits int) {
	for p.i < len(p.s) && isDigit(p.s[p.i]) {
		if n < 1e9 {
			n = n*10 + int(p.s[p.i]-'0')
		}
		p.i++
		digits++
	}
	return n, digits
}

// implicitHydrogens sets HCount of every unbracketed atom of the organic
// subset (OpenSMILES "Organic Subset"): the lowest normal valence of the
// element that is >= the atom's bond order sum (an aromatic bond counts 1),
// less that sum, and 0 when the sum is above every normal valence. An
// aromatic atom has one more bond than its sum shows (its bond in the
// Kekulé form), so it gets one hydrogen fewer, and none when the sum
// already fills the valence: c in benzene 4-2-1 = 1, n in pyridine
// 3-2-1 = 0, n with three bonds (caffeine's n(C)) 3-3 = 0, s in
// thiophene 2-2 = 0.
func (p *parser) implicitHydrogens() {
	sum := make([]int, len(p.atoms))
	for _, b := range p.bonds {
		sum[b.A] += b.Order.valence()
		sum[b.B] += b.Order.valence()
	}
	for i := range p.atoms {
		a := &p.atoms[i]
		if a.Bracket {
			continue
		}
		h := 0
		for _, v := range normalValences[a.Symbol] {
			if v >= sum[i] {
				h = v - sum[i]
				break
			}
		}
		if a.Aromatic && h > 0 {
			h--
		}
		a.HCount = h
	}
}
