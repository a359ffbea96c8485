package molecules

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/pkg/errors"
)

// DefaultTPSAPath is the TPSA set of Debian's rdkit-data package: 4,999
// NCI molecules as "SMILES,TPSA" lines after one comment line.
const DefaultTPSAPath = "/usr/share/RDKit/Data/NCI/first_5k.tpsa.csv"

// installHint is what the error for a missing TPSA file tells the user.
const installHint = "it is installed by Debian's rdkit-data package: run scripts/install-data.sh rdkit-data (as root, or with sudo), or apt-get install rdkit-data"

// Record is one molecule of a TPSA file.
type Record struct {
	// Line is the record's line in the file (from 1).
	Line     int
	Molecule *Molecule
	// TPSA is the topological polar surface area in Å² (Ertl et al. 2000),
	// as the file gives it.
	TPSA float64
}

// TPSASet is a loaded TPSA file.
type TPSASet struct {
	Path string
	// SHA256 is the hex SHA-256 of the file's bytes, for the provenance of
	// a study's rows.
	SHA256  string
	Records []Record
}

// LoadTPSA reads a TPSA file (DefaultTPSAPath when path is ""): one
// "SMILES,TPSA" record a line; lines starting with '#' and empty lines are
// skipped. Every SMILES must parse: the first that does not is an error
// naming the file and line, as is a TPSA that is not a finite number >= 0.
// A missing file's error names the rdkit-data package and
// scripts/install-data.sh.
func LoadTPSA(path string) (*TPSASet, error) {
	if path == "" {
		path = DefaultTPSAPath
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errors.Errorf("molecules: TPSA set %s does not exist: %s", path, installHint)
	}
	if err != nil {
		return nil, errors.Wrap(err, "molecules: TPSA set")
	}
	recs, err := ParseTPSA(data, path)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	return &TPSASet{Path: path, SHA256: hex.EncodeToString(sum[:]), Records: recs}, nil
}

// ParseTPSA parses the contents of a TPSA file (see LoadTPSA); name is used
// in errors ("name:12: ...").
func ParseTPSA(data []byte, name string) ([]Record, error) {
	var recs []Record
	for n, line := range bytes.Split(data, []byte("\n")) {
		s := strings.TrimSuffix(string(line), "\r")
		if s == "" || s[0] == '#' {
			continue
		}
		smiles, tpsa, ok := strings.Cut(s, ",")
		if !ok || strings.Contains(tpsa, ",") {
			return nil, errors.Errorf("molecules: %s:%d: want two fields SMILES,TPSA: %q", name, n+1, s)
		}
		v, err := strconv.ParseFloat(tpsa, 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return nil, errors.Errorf("molecules: %s:%d: TPSA %q is not a number >= 0", name, n+1, tpsa)
		}
		m, err := Parse(smiles)
		if err != nil {
			return nil, errors.WithMessagef(err, "%s:%d", name, n+1)
		}
		recs = append(recs, Record{Line: n + 1, Molecule: m, TPSA: v})
	}
	if len(recs) == 0 {
		return nil, errors.Errorf("molecules: %s has no records", name)
	}
	return recs, nil
}

// HeavyAtoms returns the heavy-atom count of every record.
func (s *TPSASet) HeavyAtoms() []int {
	n := make([]int, len(s.Records))
	for i, r := range s.Records {
		n[i] = r.Molecule.HeavyAtoms()
	}
	return n
}

// Split is a size-based split for the size-generalisation protocol.
type Split struct {
	// Train and Test are indices into the sizes given to SplitBySize, each
	// in increasing order.
	Train, Test []int
	// MaxTrain is the largest size in Train, MinTest the smallest in Test
	// (MaxTrain <= MinTest; equal when molecules of one size straddle the
	// cut).
	MaxTrain, MinTest int
}

// SplitBySize puts the largest testPercent% of the items (sizes[i] is item
// i's size, such as its heavy-atom count) in Test and the others in Train:
// the items are ordered by size, ties by index, and the last
// round(len(sizes)*testPercent/100) of that order are Test. So among items
// of the size at the cut, the later ones are tested. The split depends on
// nothing but sizes and testPercent. Errors: testPercent outside (0, 100),
// a negative size, or a split that leaves Train or Test empty.
func SplitBySize(sizes []int, testPercent float64) (*Split, error) {
	if !(testPercent > 0 && testPercent < 100) {
		return nil, errors.Errorf("molecules: test percentage %v outside (0, 100)", testPercent)
	}
	for i, s := range sizes {
		if s < 0 {
			return nil, errors.Errorf("molecules: size %d of item %d is negative", s, i)
		}
	}
	k := int(math.Round(float64(len(sizes)) * testPercent / 100))
	if k < 1 || k >= len(sizes) {
		return nil, errors.Errorf("molecules: %v%% of %d items is %d test items: Train and Test must both have some", testPercent, len(sizes), k)
	}
	order := make([]int, len(sizes))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(sizes[a], sizes[b]), cmp.Compare(a, b))
	})
	cut := len(sizes) - k
	sp := &Split{
		Train:    slices.Sorted(slices.Values(order[:cut])),
		Test:     slices.Sorted(slices.Values(order[cut:])),
		MaxTrain: sizes[order[cut-1]],
		MinTest:  sizes[order[cut]],
	}
	return sp, nil
}
