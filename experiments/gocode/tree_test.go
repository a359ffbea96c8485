package gocode

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// checkFile checks the invariants of a parsed file: a well-formed tree, a
// node for every byte, and every byte inside its node's range (the root
// holds every byte).
func checkFile(t *testing.T, f *File, comments bool) {
	t.Helper()
	if err := f.Tree.Check(); err != nil {
		t.Fatal(err)
	}
	if len(f.ByteNode) != len(f.Src) {
		t.Fatalf("%d byte nodes for %d bytes", len(f.ByteNode), len(f.Src))
	}
	// Ranges of the nodes, numbered as build numbers them.
	mode := parser.SkipObjectResolution
	if comments {
		mode |= parser.ParseComments
	}
	fset := token.NewFileSet()
	af, err := parser.ParseFile(fset, "x.go", f.Src, mode)
	if err != nil {
		t.Fatal(err)
	}
	base := fset.File(af.FileStart).Base()
	var lo, hi []int
	ast.Inspect(af, func(n ast.Node) bool {
		if n != nil {
			lo, hi = append(lo, int(n.Pos())-base), append(hi, int(n.End())-base)
		}
		return true
	})
	for i, v := range f.ByteNode {
		if v < 0 || int(v) >= f.Tree.Len() {
			t.Fatalf("byte %d: node %d outside the %d nodes", i, v, f.Tree.Len())
		}
		if v != 0 && int(v) < len(lo) && (i < lo[v] || i >= hi[v]) {
			t.Fatalf("byte %d (%q) in node %d (%s) of range [%d, %d)", i, f.Src[i], v, KindName(f.Tree.Kind[v]), lo[v], hi[v])
		}
	}
}

func TestParseFileNodes(t *testing.T) {
	const src = "package p\n\n// F adds.\nfunc (r T) F(a, b int) int {\n\t// sum\n\treturn a + b // done\n}\n"
	for _, tc := range []struct {
		comments bool
		at       string // the first byte of this text
		kind     string
		depth    int32
	}{
		{false, "package", "File", 0},
		{false, "\n\n", "File", 0},
		{false, "// F adds", "File", 0}, // a doc comment without comments: whitespace
		{false, "(r T)", "FieldList", 2},
		{false, "F(", "Ident", 2}, // the name is the FuncDecl's, inside its FuncType's range
		{false, "a, b", "Ident", 5},
		{false, ", b", "Field", 4},
		{false, "+ b", "BinaryExpr", 4},
		{false, "// sum", "BlockStmt", 2},
		{false, "// done", "BlockStmt", 2},
		{true, "// F adds", "Comment", 3},
		{true, "// sum", "Comment", 4}, // free comment: a CommentGroup under the BlockStmt
		{true, "// done", "Comment", 4},
		{true, "+ b", "BinaryExpr", 4},
	} {
		f, err := ParseFile("x.go", []byte(src), tc.comments)
		if err != nil {
			t.Fatal(err)
		}
		checkFile(t, f, tc.comments)
		i := strings.Index(src, tc.at)
		v := f.ByteNode[i]
		if k := KindName(f.Tree.Kind[v]); k != tc.kind || f.Tree.Depth[v] != tc.depth {
			t.Errorf("comments %v: byte %d of %q is in a %s at depth %d, want %s at depth %d", tc.comments, i, tc.at, k, f.Tree.Depth[v], tc.kind, tc.depth)
		}
	}
}

func TestParseFileError(t *testing.T) {
	for _, src := range []string{"", "package", "package p; func {", "func f() {}"} {
		if _, err := ParseFile("bad.go", []byte(src), false); err == nil || !strings.Contains(err.Error(), "bad.go") {
			t.Errorf("%q: error %v, want a parse error naming bad.go", src, err)
		}
	}
}

func TestTreeCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		tree Tree
		want string
	}{
		{"empty", Tree{}, "no nodes"},
		{"lengths", Tree{Parent: []int32{-1, 0}, Depth: []int32{0}}, "equal lengths"},
		{"root", Tree{Parent: []int32{0}, Depth: []int32{0}}, "root"},
		{"forward parent", Tree{Parent: []int32{-1, 2, 0}, Depth: []int32{0, 2, 1}}, "want a node in [0, 1)"},
		{"depth", Tree{Parent: []int32{-1, 0}, Depth: []int32{0, 2}}, "depth 2"},
	} {
		if err := tc.tree.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	f, err := ParseFile("x.go", bytes.Repeat([]byte("\n"), 3), false)
	if err == nil {
		t.Errorf("a file of newlines parsed: %d nodes", f.Tree.Len())
	}
}
