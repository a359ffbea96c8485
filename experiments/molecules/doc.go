// Package molecules turns molecules written as SMILES into graphs for the
// graph experiments (issue #34, graphs of real molecules). It has a SMILES
// parser, atom and bond features, a conversion to graphdata.Graph, a loader
// for the TPSA set of Debian's rdkit-data package, and a size-based split
// that trains on small molecules and tests on the largest.
//
// # SMILES
//
// Parse reads SMILES as defined by Weininger (1988, "SMILES, a chemical
// language and information system. 1. Introduction to methodology and
// encoding rules", J. Chem. Inf. Comput. Sci. 28, 31-36) and the OpenSMILES
// specification (http://opensmiles.org/opensmiles.html). It accepts:
//
//	atoms        the organic subset B C N O P S F Cl Br I, aromatic b c n o p s, and *;
//	             bracket atoms [isotope symbol chirality hcount charge :class] for any
//	             of the 118 elements and aromatic b c n o p s se as: [nH] [NH4+] [O-]
//	             [13C@@H] [Fe+2] [se] [2H] [CH4:2]; a charge is +, -, +n, -n (n of one
//	             or two digits, |charge| <= 15) or a repeated sign (++ is +2)
//	bonds        - = # $ : and the directional / \ (single bonds); no symbol is an
//	             aromatic bond between two aromatic atoms and a single bond otherwise
//	branches     ( ... ), nested to any depth (no recursion), a bond or '.' may start one
//	rings        ring-closure digits 0-9 and %10-%99, reused once closed, with a bond
//	             symbol on either end or on both if they agree
//	components   '.' between disconnected parts (also inside a branch: c1cc(O.NCCO)ccc1)
//
// Unbracketed atoms of the organic subset get implicit hydrogens by the
// OpenSMILES rule: the lowest normal valence (B 3, C 4, N 3 or 5, O 2, P 3
// or 5, S 2, 4 or 6, halogens 1) that is >= the sum of the atom's bond
// orders (an aromatic bond counts 1), less that sum, or 0 when the sum is
// above every valence. An aromatic atom has one bond more than its written
// bonds show (its double bond in a Kekulé form), so it gets one hydrogen
// fewer, and none when its bonds already fill the lowest valence: benzene's
// c has 1, pyridine's n 0, caffeine's three-connected n(C) 0, thiophene's s
// 0. (Counting the extra bond before choosing the valence instead would
// give n(C) valence 5 and one hydrogen, and thiophene's s valence 4 and one
// hydrogen.) A bracket atom has the hydrogens it states ([C] has none).
// Hydrogens written as atoms ([H], [2H]) stay atoms: Molecule.HeavyAtoms
// leaves them out, Molecule.NumHydrogens and Molecule.Hydrogens count them
// with the HCounts.
//
// Parse refuses, with a *SyntaxError naming the byte (from 0) and what is
// wrong: an empty string; an unclosed ring bond; an unbalanced or empty
// branch, or one with no atom before it; an unknown element, an element
// outside the organic subset without brackets ("element Na must be written
// in brackets"), a lowercase symbol that is not aromatic; an unclosed or
// malformed bracket atom (an isotope of more than 3 digits, a charge beyond
// ±15, a hydrogen count on H, a chirality class out of range such as @TH3,
// ':' without a class); a bond symbol with nothing to bond to (at the
// start, at the end, before '(' ')' or '.', after '.'); two bond symbols in
// a row; a ring closure onto its own atom, one that duplicates a bond
// (C1C1, C12CCCCC12), one whose two bond symbols differ (C=1CCCCC#1), a
// ring-closure digit after a branch, after '(' or after '.'; '%' without
// two digits; '.' at either end or twice; whitespace (a SMILES in a file
// ends at whitespace; Parse takes the SMILES alone); any other character.
// Parse never panics (FuzzParse).
//
// Not supported: stereochemistry is read and checked for form (@, @@, @TH1,
// @AL2, @SP3, @TB1-20, @OH1-30, / and \) but ignored, so molecules that
// differ only in it are equal. There is no aromaticity perception or
// kekulization: Atom.Aromatic is what was written, a Kekulé ring stays
// single and double bonds, and an aromatic system whose hydrogens the
// rule above cannot know (c1ccnc1 for pyrrole, where [nH] is needed) is
// not refused. Valences are not checked: [CH5] and a carbon of five bonds
// parse (the latter with no hydrogens). Atom classes are kept; the
// nonstandard aromatic [te] and SMILES extensions (CXSMILES, radicals) are
// not read.
//
// # Features
//
// An atom's feature (Molecule.AtomFields, AtomFields.Index) is one index
// in [0, NumAtomFeatures = 700), for one embedding table:
//
//	index = ((element*2 + aromatic)*5 + charge)*5 + hydrogens
//	element    0-12 C N O S F Cl Br I P B Si Se H (FeatureElements); 13 every other element and *
//	aromatic   0 or 1 (as written)
//	charge     0: <= -2, 1: -1, 2: 0, 3: +1, 4: >= +2
//	hydrogens  0, 1, 2, 3, 4: 4 or more (HCount and bonded [H] atoms)
//
// DecodeAtomFeature inverts it. A bond's feature (BondFeature) is 0 single,
// 1 double, 2 triple, 3 quadruple, 4 aromatic. Molecule.ToGraph returns a
// MolGraph: the graphdata.Graph with node i for atom i and an edge per
// bond, the atom features [N], and the edges as Graph.Edges lists them
// with their bond features [E]. MolGraph.OneHot gives the atom features as
// one-hot rows [N*25] (element 14, aromatic 1, charge 5, hydrogens 5), the
// layout of graphdata.Example.Features.
//
// # The TPSA set
//
// LoadTPSA reads DefaultTPSAPath, /usr/share/RDKit/Data/NCI/first_5k.tpsa.csv
// of Debian's rdkit-data package (scripts/install-data.sh installs it): 4,999
// NCI molecules in Kekulé SMILES with their topological polar surface area
// (Ertl, Rohde and Selzer 2000, "Fast calculation of molecular polar
// surface area as a sum of fragment-based contributions and its
// application to the prediction of drug transport properties", J. Med.
// Chem. 43, 3714-3717), after one comment line. Every line parses; the
// molecules have 2 to 122 heavy atoms. The set carries the file's SHA-256.
// Since the file is Kekulé, the aromatic bit of its atoms is always 0 and
// its rings are alternating single and double bonds.
//
// SplitBySize is the split of the size-generalisation protocol: order the
// molecules by heavy-atom count, ties by index, and test on the last
// round(N*p/100); it is deterministic, and molecules of the size at the
// cut may fall on both sides (the later ones in Test).
//
// # Tests
//
// testdata/sample.csv holds 56 lines of the Debian file (chosen for
// bracket atoms, charges, metals, %nn ring closures, '.', the smallest and
// the largest molecule, every 200th line). testdata/sample_rdkit.tsv is
// RDKit's (2022.09.3, Debian python3-rdkit) heavy atoms, bonds and formula
// of each, and its aromatic SMILES of each with its number of aromatic
// atoms; testdata/rdkit_reference.py writes it. The tests need neither
// RDKit nor the Debian file; with the file they parse all of it and compare
// its totals of heavy atoms, bonds and hydrogens with RDKit's.
package molecules
