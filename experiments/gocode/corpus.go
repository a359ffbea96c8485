package gocode

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/pkg/errors"
)

// Options configure LoadCorpus and the relations of its windows.
type Options struct {
	// Dirs restricts the corpus to these comma-separated sub-directories of
	// the root (slash-separated, relative, with their sub-directories); ""
	// means the whole root. Each must exist.
	Dirs string
	// Tests includes _test.go files (excluded by default).
	Tests bool
	// Comments parses with parser.ParseComments: comments become Comment
	// and CommentGroup nodes. Without it, a comment's bytes belong to the
	// innermost node around them, as whitespace does.
	Comments bool
	// MaxBytes caps the source bytes loaded (0: no cap), shared by the
	// splits in proportion to their fractions (see LoadCorpus).
	MaxBytes int64
	// ValFrac and TestFrac are the fractions of packages held out for
	// validation and test; each in [0, 1), their sum < 1.
	ValFrac  float64 `opt:"val-frac"`
	TestFrac float64 `opt:"test-frac"`
	// MaxUp and MaxDown clip the steps up and down of a relation (>= 0).
	MaxUp   int
	MaxDown int
}

// DefaultOptions returns the defaults: 10% of the packages for
// validation, 10% for test, relations clipped at 8 steps up and 8 down, no
// cap, no tests, no comments.
func DefaultOptions() Options {
	return Options{ValFrac: 0.1, TestFrac: 0.1, MaxUp: 8, MaxDown: 8}
}

// NumRelations returns NumTreeRelations(o.MaxUp, o.MaxDown).
func (o Options) NumRelations() int { return NumTreeRelations(o.MaxUp, o.MaxDown) }

func (o Options) check() error {
	if o.ValFrac < 0 || o.ValFrac >= 1 || o.TestFrac < 0 || o.TestFrac >= 1 || o.ValFrac+o.TestFrac >= 1 {
		return errors.Errorf("gocode: validation fraction %g and test fraction %g must be in [0, 1) with a sum below 1", o.ValFrac, o.TestFrac)
	}
	if o.MaxUp < 0 || o.MaxDown < 0 {
		return errors.Errorf("gocode: relation bounds max-up %d and max-down %d must not be negative", o.MaxUp, o.MaxDown)
	}
	if o.MaxBytes < 0 {
		return errors.Errorf("gocode: max bytes %d must not be negative", o.MaxBytes)
	}
	return nil
}

// Split names a part of the corpus.
type Split int

// The splits.
const (
	Train Split = iota
	Validation
	Test
)

var splitNames = [...]string{"train", "validation", "test"}

func (s Split) String() string {
	if s >= 0 && int(s) < len(splitNames) {
		return splitNames[s]
	}
	return fmt.Sprintf("Split(%d)", int(s))
}

// SplitOf returns the split of package directory pkg (relative to the
// root, slash-separated): with h the FNV-1a hash of "split:"+pkg as a
// fraction u in [0, 1), Validation if u < valFrac, Test if u < valFrac +
// testFrac, Train otherwise. It depends on the package path only, so a
// package never spans two splits and keeps its split as the corpus grows.
func SplitOf(pkg string, valFrac, testFrac float64) Split {
	u := unit("split:" + pkg)
	switch {
	case u < valFrac:
		return Validation
	case u < valFrac+testFrac:
		return Test
	}
	return Train
}

func unit(s string) float64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return float64(h.Sum64()>>11) / (1 << 53)
}

// Skip records a file that did not parse or could not be read.
type Skip struct {
	Path string
	Err  string
}

// MaxSkipReports is the number of skipped files whose paths and errors
// Corpus.SkippedFiles keeps.
const MaxSkipReports = 5

// Corpus is a set of parsed Go files split by package.
type Corpus struct {
	// Root is the directory the files were read from.
	Root string
	// Opts are the options it was loaded with.
	Opts Options
	// Files holds the files of each split (indexed by Split), in package
	// order then file name order.
	Files [3][]*File
	// Skipped counts the files that did not parse or could not be read;
	// SkippedFiles keeps the first MaxSkipReports of them.
	Skipped      int
	SkippedFiles []Skip
	// Capped counts the files left out by Options.MaxBytes.
	Capped int
}

// Bytes returns the number of source bytes of split s.
func (c *Corpus) Bytes(s Split) int64 {
	var n int64
	for _, f := range c.Files[s] {
		n += int64(len(f.Src))
	}
	return n
}

// Packages returns the number of package directories of split s.
func (c *Corpus) Packages(s Split) int {
	n := 0
	for i, f := range c.Files[s] {
		if i == 0 || f.Pkg != c.Files[s][i-1].Pkg {
			n++
		}
	}
	return n
}

// Hash returns the hex SHA-256 of what a model trained on the corpus sees:
// for each split, the path and bytes of each file, and the options that
// change the trees or relations (Comments, MaxUp, MaxDown). Checkpoints
// record it; resuming on another corpus should be refused.
func (c *Corpus) Hash() string {
	h := sha256.New()
	fmt.Fprintf(h, "gocode/1 comments=%v up=%d down=%d\n", c.Opts.Comments, c.Opts.MaxUp, c.Opts.MaxDown)
	var n [8]byte
	for s, files := range c.Files {
		fmt.Fprintf(h, "split %d %d\n", s, len(files))
		for _, f := range files {
			binary.LittleEndian.PutUint64(n[:], uint64(len(f.Src)))
			h.Write([]byte(f.Path))
			h.Write(n[:])
			h.Write(f.Src)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// DefaultRoot returns $(go env GOROOT)/src, falling back to
// runtime.GOROOT() if the go command is not available.
func DefaultRoot() string {
	root := ""
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		root = strings.TrimSpace(string(out))
	}
	if root == "" {
		root = runtime.GOROOT() //nolint:staticcheck // documented fallback
	}
	return filepath.Join(root, "src")
}

type candidate struct {
	rel  string // slash path relative to root
	pkg  string
	size int64
}

// skipDir reports whether the go command would ignore directory name:
// testdata, vendor, and names starting with "." or "_".
func skipDir(name string) bool {
	return name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// LoadCorpus reads the Go files under root ("" means DefaultRoot), or
// under the sub-directories o.Dirs of it, parses each (ParseFile) and splits
// them by package directory (SplitOf). Directories named testdata or vendor
// or starting with "." or "_" are not entered; _test.go files are left out
// unless o.Tests. A file that cannot be read or does not parse is skipped
// and counted (Corpus.Skipped), never an error.
//
// With o.MaxBytes > 0, split s gets at most MaxBytes times its fraction
// (1-ValFrac-TestFrac for train): its packages are taken in the order of a
// second hash of their paths (a sample spread over the tree, the same for
// every cap) and their files in name order, and a file that would pass the
// split's share is left out (Corpus.Capped); files left out are not parsed.
//
// It returns an error if the options are invalid, root or a directory of
// o.Dirs does not exist or cannot be walked, or no Go file is found.
func LoadCorpus(root string, o Options) (*Corpus, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if root == "" {
		root = DefaultRoot()
	}
	st, err := os.Stat(root)
	if err != nil {
		return nil, errors.Wrapf(err, "gocode: source root %s", root)
	}
	if !st.IsDir() {
		return nil, errors.Errorf("gocode: source root %s is not a directory", root)
	}
	dirs := []string{"."}
	if strings.TrimSpace(o.Dirs) != "" {
		dirs = nil
		for _, d := range strings.Split(o.Dirs, ",") {
			d = path.Clean(strings.TrimSpace(d))
			if d == "" || path.IsAbs(d) || d == ".." || strings.HasPrefix(d, "../") {
				return nil, errors.Errorf("gocode: directory %q of dirs %q must be relative to the root %s", d, o.Dirs, root)
			}
			if st, err := os.Stat(filepath.Join(root, filepath.FromSlash(d))); err != nil || !st.IsDir() {
				return nil, errors.Errorf("gocode: directory %q of dirs %q is not a directory under %s", d, o.Dirs, root)
			}
			dirs = append(dirs, d)
		}
	}
	var cands []candidate
	seen := map[string]bool{}
	for _, d := range dirs {
		top := filepath.Join(root, filepath.FromSlash(d))
		err := filepath.WalkDir(top, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				if p != top && skipDir(e.Name()) {
					return filepath.SkipDir
				}
				return nil
			}
			name := e.Name()
			if !strings.HasSuffix(name, ".go") || !e.Type().IsRegular() || (!o.Tests && strings.HasSuffix(name, "_test.go")) {
				return nil
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			if seen[rel] { // overlapping entries of Dirs
				return nil
			}
			seen[rel] = true
			info, err := e.Info()
			if err != nil {
				return err
			}
			cands = append(cands, candidate{rel: rel, pkg: path.Dir(rel), size: info.Size()})
			return nil
		})
		if err != nil {
			return nil, errors.Wrapf(err, "gocode: walking %s", top)
		}
	}
	if len(cands) == 0 {
		return nil, errors.Errorf("gocode: no Go files under %s (dirs %q; testdata, vendor, _test.go files excluded)", root, o.Dirs)
	}
	// Packages in the order of a hash of their paths, files by name.
	slices.SortFunc(cands, func(a, b candidate) int {
		ua, ub := unit("order:"+a.pkg), unit("order:"+b.pkg)
		switch {
		case a.pkg == b.pkg:
			return strings.Compare(a.rel, b.rel)
		case ua < ub:
			return -1
		case ua > ub:
			return 1
		}
		return strings.Compare(a.pkg, b.pkg)
	})
	c := &Corpus{Root: root, Opts: o}
	fracs := [3]float64{1 - o.ValFrac - o.TestFrac, o.ValFrac, o.TestFrac}
	var used [3]int64
	for _, cd := range cands {
		s := SplitOf(cd.pkg, o.ValFrac, o.TestFrac)
		if o.MaxBytes > 0 && float64(used[s]+cd.size) > float64(o.MaxBytes)*fracs[s] {
			c.Capped++
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(cd.rel)))
		var f *File
		if err == nil {
			f, err = ParseFile(cd.rel, src, o.Comments)
		}
		if err != nil {
			c.Skipped++
			if len(c.SkippedFiles) < MaxSkipReports {
				c.SkippedFiles = append(c.SkippedFiles, Skip{Path: cd.rel, Err: err.Error()})
			}
			continue
		}
		f.Pkg = cd.pkg
		used[s] += int64(len(src))
		c.Files[s] = append(c.Files[s], f)
	}
	if len(c.Files[Train])+len(c.Files[Validation])+len(c.Files[Test]) == 0 {
		msg := ""
		if len(c.SkippedFiles) > 0 {
			msg = "; first: " + c.SkippedFiles[0].Err
		}
		return nil, errors.Errorf("gocode: no Go file under %s was loaded: %d found, %d skipped (unreadable or did not parse), %d left out by the cap of %d bytes%s",
			root, len(cands), c.Skipped, c.Capped, o.MaxBytes, msg)
	}
	return c, nil
}

// Summary returns one line per split (files, packages, bytes) and the
// skipped files, for logs and reports.
func (c *Corpus) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "go corpus %s (dirs %q):", c.Root, c.Opts.Dirs)
	for s := Train; s <= Test; s++ {
		fmt.Fprintf(&b, " %s %d files, %d packages, %d bytes;", s, len(c.Files[s]), c.Packages(s), c.Bytes(s))
	}
	fmt.Fprintf(&b, " %d skipped (unreadable or did not parse), %d left out by the byte cap", c.Skipped, c.Capped)
	for _, sk := range c.SkippedFiles {
		fmt.Fprintf(&b, "\n  skipped %s: %s", sk.Path, sk.Err)
	}
	return b.String()
}
