package codestudy

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rpe-go/rpe/experiments/gocode"
	"github.com/rpe-go/rpe/experiments/trainer"
)

// pkgNames are writeSrc's packages: with validation and test fractions
// 0.3 each, 4 land in train, 5 in validation and 7 in test (gocode.SplitOf).
var pkgNames = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima",
	"mike", "november", "oscar", "papa"}

// writeSrc writes a small Go source tree: 16 packages of two files of a
// few hundred bytes, and one file that does not parse. It returns the
// root.
func writeSrc(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	write := func(p, s string) {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, name := range pkgNames {
		write(name+"/a.go", fmt.Sprintf(`package p%d

// Sum adds the first n squares.
func Sum(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		if i%%%d == 0 {
			s += i * i
		} else {
			s -= i
		}
	}
	return s + %d
}
`, i, i+2, i))
		write(name+"/b.go", fmt.Sprintf(`package p%d

type T%d struct {
	Name  string
	Count int
}

func (t *T%d) Add(k int) {
	t.Count += k
	if t.Count > %d {
		t.Name = "big"
	}
}
`, i, i, i, 10*i))
	}
	write("broken/bad.go", "package broken\nfunc {")
	return root
}

// tinyPlan is a plan of tiny models on writeSrc's tree: L = 16, tested at
// 16, 32 and 64 bytes.
func tinyPlan(encs ...string) Plan {
	p, _ := Preset("quick")
	p.Preset, p.Encodings, p.Seeds = "test", encs, []int64{1}
	p.Base.Model.DModel, p.Base.Model.Heads, p.Base.Model.Layers, p.Base.Model.FFN = 8, 2, 1, 16
	p.Base.Steps, p.Base.Batch, p.Base.SeqLen, p.Base.Warmup, p.Base.EvalBatch = 6, 4, 16, 2, 4
	p.Corpus = gocode.DefaultOptions()
	p.Corpus.ValFrac, p.Corpus.TestFrac, p.Corpus.MaxUp, p.Corpus.MaxDown = 0.3, 0.3, 4, 4
	p.ValWindows, p.TestWindows = 4, 6
	return p
}

// firstTask loads the plan's corpus from src (output directory dir) and
// returns the runner, the plan's first job, its configuration and task.
func firstTask(t *testing.T, p Plan, src, dir string) (*runner, Job, trainer.Config, *Task) {
	t.Helper()
	r, err := newRunner(withSrc(p, src), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := p.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := p.Config(jobs[0])
	if err != nil {
		t.Fatal(err)
	}
	task, err := NewTask(cfg, Data{Corpus: r.corpus, Val: r.val})
	if err != nil {
		t.Fatal(err)
	}
	return r, jobs[0], cfg, task
}

// withSrc is p reading its corpus from src.
func withSrc(p Plan, src string) Plan {
	p.Src = src
	return p
}
