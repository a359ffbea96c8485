package graphstudy

import (
	"fmt"
	"slices"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/graphdata"
	"github.com/rpe-go/rpe/experiments/molecules"
)

// KindTPSA is the Options.Kind of the molecule data sets: per molecule,
// its topological polar surface area (a regression target in Å²).
const KindTPSA = "tpsa"

// MoleculeTask is the molecule task of a plan (issue #34): TPSA
// regression on the molecules of a TPSA file (molecules.LoadTPSA),
// trained on the small molecules and tested on the largest.
type MoleculeTask struct {
	// Path is the TPSA file ("": molecules.DefaultTPSAPath, Debian's
	// rdkit-data).
	Path string `json:"path,omitempty"`
	// SHA256, if set, must be the file's hash (molecules.TPSASet.SHA256):
	// a plan refuses another file.
	SHA256 string `json:"sha256,omitempty"`
	// TestPercent is the share of the molecules, the largest by heavy
	// atoms, in the out-of-distribution test "ood"
	// (molecules.SplitBySize).
	TestPercent float64 `json:"test_percent"`
	// Fracs split the other (small) molecules, in file order, into the
	// training, validation and in-distribution test ("test") sets
	// (graphdata.Split).
	Fracs []float64 `json:"fracs"`
}

// MoleculeData is a molecule task's data.
type MoleculeData struct {
	// Train, Val, Test and OOD are regression data sets (KindTPSA): node
	// i is atom i with its one-hot atom features (molecules.OneHotWidth
	// columns, MolGraph.OneHot), an edge per bond, Example.Target the TPSA,
	// Example.ID "tpsa/<first 12 hex digits of the file hash>/<line>".
	Train, Val, Test, OOD *graphdata.Dataset
	// Heavy gives each set's range of heavy atoms, "2-26", by set name
	// ("train", "val", "test", "ood").
	Heavy map[string]string
	// SHA256 is the file's hash; Split the size split.
	SHA256 string
	Split  *molecules.Split
}

// LoadMolecules loads the task's TPSA file (checking its hash if the task
// names one) and builds its data (MoleculeDatasets).
func LoadMolecules(mt MoleculeTask) (*MoleculeData, error) {
	set, err := molecules.LoadTPSA(mt.Path)
	if err != nil {
		return nil, err
	}
	if mt.SHA256 != "" && set.SHA256 != mt.SHA256 {
		return nil, errors.Errorf("graphs: TPSA set %s has SHA-256 %s, the plan wants %s", set.Path, set.SHA256, mt.SHA256)
	}
	return MoleculeDatasets(set, mt)
}

// MoleculeDatasets builds the data of a molecule task from a loaded set:
// the largest TestPercent% of the molecules by heavy atoms are OOD
// (molecules.SplitBySize), the others, in file order, are split by Fracs
// into Train, Val and Test. Errors: a bad split, or a molecule that has no
// graph.
func MoleculeDatasets(set *molecules.TPSASet, mt MoleculeTask) (*MoleculeData, error) {
	heavy := set.HeavyAtoms()
	sp, err := molecules.SplitBySize(heavy, mt.TestPercent)
	if err != nil {
		return nil, errors.WithMessage(err, "graphs")
	}
	tag := set.SHA256
	if len(tag) > 12 {
		tag = tag[:12]
	}
	build := func(idx []int) (*graphdata.Dataset, error) {
		ds := &graphdata.Dataset{NumFeatures: molecules.OneHotWidth, Regression: true}
		ds.Options = graphdata.TaskOptions{Kind: KindTPSA, Count: len(idx), MinNodes: graphdata.MaxGraphNodes}
		for _, i := range idx {
			r := set.Records[i]
			mg, err := r.Molecule.ToGraph()
			if err != nil {
				return nil, errors.WithMessagef(err, "graphs: %s:%d", set.Path, r.Line)
			}
			ds.Examples = append(ds.Examples, &graphdata.Example{ID: fmt.Sprintf("%s/%s/%d", KindTPSA, tag, r.Line),
				Graph: mg.Graph, Features: mg.OneHot(), Target: r.TPSA, Marked: -1})
			ds.Options.MinNodes = min(ds.Options.MinNodes, mg.Graph.N)
			ds.Options.MaxNodes = max(ds.Options.MaxNodes, mg.Graph.N)
		}
		return ds, nil
	}
	small, err := build(sp.Train)
	if err != nil {
		return nil, err
	}
	parts, err := graphdata.Split(small, mt.Fracs)
	if err != nil {
		return nil, errors.WithMessage(err, "graphs: the small molecules")
	}
	if len(parts) != 3 {
		return nil, errors.Errorf("graphs: %d split fractions of the small molecules, want 3 (train, validation, test)", len(parts))
	}
	md := &MoleculeData{Train: parts[0], Val: parts[1], Test: parts[2], Heavy: map[string]string{}, SHA256: set.SHA256, Split: sp}
	if md.OOD, err = build(sp.Test); err != nil {
		return nil, err
	}
	// graphdata.Split cuts in order: part k holds the next records of sp.Train
	rng := func(idx []int) string {
		hs := make([]int, len(idx))
		for k, i := range idx {
			hs[k] = heavy[i]
		}
		return fmt.Sprintf("%d-%d", slices.Min(hs), slices.Max(hs))
	}
	n0, n1 := len(md.Train.Examples), len(md.Val.Examples)
	md.Heavy["train"], md.Heavy["val"], md.Heavy["test"] = rng(sp.Train[:n0]), rng(sp.Train[n0:n0+n1]), rng(sp.Train[n0+n1:])
	md.Heavy["ood"] = rng(sp.Test)
	return md, nil
}
