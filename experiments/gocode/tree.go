package gocode

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"

	"github.com/pkg/errors"
)

// Tree is the syntax tree of one file in compact form: node 0 is the
// *ast.File, Parent[0] = -1 and Depth[0] = 0; for every other node i,
// Parent[i] < i and Depth[i] = Depth[Parent[i]] + 1. Nodes are numbered in
// the pre-order of ast.Inspect (free-floating comments, with
// Options.Comments, come after it; see the package documentation). Kind[i]
// names the node's go/ast type through KindName.
type Tree struct {
	Parent []int32
	Depth  []int32
	Kind   []uint8
}

// Len returns the number of nodes.
func (t *Tree) Len() int { return len(t.Parent) }

// Check returns an error unless t is well formed: Parent, Depth and Kind of
// equal non-zero length, node 0 the root (parent -1, depth 0), and every
// other node with a parent of smaller index and a depth one more than its
// parent's.
func (t *Tree) Check() error {
	n := len(t.Parent)
	if n == 0 {
		return errors.New("gocode: tree has no nodes")
	}
	if len(t.Depth) != n || (t.Kind != nil && len(t.Kind) != n) {
		return errors.Errorf("gocode: tree has %d parents, %d depths and %d kinds, want equal lengths", n, len(t.Depth), len(t.Kind))
	}
	if t.Parent[0] != -1 || t.Depth[0] != 0 {
		return errors.Errorf("gocode: tree node 0 has parent %d and depth %d, want the root (-1, 0)", t.Parent[0], t.Depth[0])
	}
	for i := 1; i < n; i++ {
		p := t.Parent[i]
		if p < 0 || int(p) >= i {
			return errors.Errorf("gocode: tree node %d has parent %d, want a node in [0, %d)", i, p, i)
		}
		if t.Depth[i] != t.Depth[p]+1 {
			return errors.Errorf("gocode: tree node %d has depth %d, its parent %d depth %d", i, t.Depth[i], p, t.Depth[p])
		}
	}
	return nil
}

// kinds lists the go/ast node types; Kind values index it (0 is "other",
// for a type this list lacks).
var kinds = []string{"other",
	"File", "Comment", "CommentGroup", "Field", "FieldList",
	"BadExpr", "Ident", "Ellipsis", "BasicLit", "FuncLit", "CompositeLit",
	"ParenExpr", "SelectorExpr", "IndexExpr", "IndexListExpr", "SliceExpr",
	"TypeAssertExpr", "CallExpr", "StarExpr", "UnaryExpr", "BinaryExpr",
	"KeyValueExpr", "ArrayType", "StructType", "FuncType", "InterfaceType",
	"MapType", "ChanType",
	"BadStmt", "DeclStmt", "EmptyStmt", "LabeledStmt", "ExprStmt", "SendStmt",
	"IncDecStmt", "AssignStmt", "GoStmt", "DeferStmt", "ReturnStmt",
	"BranchStmt", "BlockStmt", "IfStmt", "CaseClause", "SwitchStmt",
	"TypeSwitchStmt", "CommClause", "SelectStmt", "ForStmt", "RangeStmt",
	"ImportSpec", "ValueSpec", "TypeSpec", "BadDecl", "GenDecl", "FuncDecl",
}

var kindIndex = func() map[string]uint8 {
	m := make(map[string]uint8, len(kinds))
	for i, k := range kinds {
		m[k] = uint8(i)
	}
	return m
}()

// KindName returns the go/ast type name of a Tree.Kind value ("File",
// "Ident", ...), "other" for 0 or an unknown value.
func KindName(k uint8) string {
	if int(k) < len(kinds) {
		return kinds[k]
	}
	return "other"
}

func kindOf(n ast.Node) uint8 {
	t := reflect.TypeOf(n)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return kindIndex[t.Name()]
}

// File is one parsed source file.
type File struct {
	// Path is the file's path relative to the corpus root, slash-separated
	// (the name given to ParseFile).
	Path string
	// Pkg is the package directory relative to the root (its import path
	// for GOROOT/src), "." for the root itself.
	Pkg string
	// Src holds the file's bytes.
	Src []byte
	// Tree is the file's syntax tree.
	Tree Tree
	// ByteNode [len(Src)] is the innermost node containing each byte.
	ByteNode []int32
}

// ParseFile parses src as Go source named name (for messages) with
// go/parser, with comments as nodes if comments is true, and returns the
// file with its tree and the node of every byte. It returns the parser's
// error if src does not parse.
func ParseFile(name string, src []byte, comments bool) (*File, error) {
	mode := parser.SkipObjectResolution
	if comments {
		mode |= parser.ParseComments
	}
	fset := token.NewFileSet()
	af, err := parser.ParseFile(fset, name, src, mode)
	if err != nil {
		return nil, errors.Wrapf(err, "gocode: parsing %s", name)
	}
	tf := fset.File(af.FileStart)
	if tf == nil {
		return nil, errors.Errorf("gocode: parsing %s: no position information", name)
	}
	f := &File{Path: name, Src: src, ByteNode: make([]int32, len(src))}
	build(f, af, tf, comments)
	return f, nil
}

// build numbers the nodes of af in pre-order and paints each node's byte
// range [Pos, End) with its id unless a shorter range holds the byte
// already, so that every byte ends with the innermost node containing it
// (node 0, the file, covers every byte). Shortest rather than last wins
// because go/ast ranges do not always nest: a FuncDecl's FuncType runs from
// "func" to the results and so covers the receiver and the name, which are
// children of the FuncDecl; they keep their bytes.
func build(f *File, af *ast.File, tf *token.File, comments bool) {
	size := len(f.Src)
	base := tf.Base()
	t := &f.Tree
	// span[id] is the length of node id's range; a byte goes to the
	// shortest range holding it, the later node in pre-order on a tie.
	span := []int{size + 1}
	paint := func(id int32, n ast.Node) {
		p, e := n.Pos(), n.End()
		if !p.IsValid() || !e.IsValid() {
			span = append(span, size+1)
			return
		}
		lo, hi := max(int(p)-base, 0), min(int(e)-base, size)
		w := max(hi-lo, 0)
		span = append(span, w)
		for i := lo; i < hi; i++ {
			if span[f.ByteNode[i]] >= w {
				f.ByteNode[i] = id
			}
		}
	}
	add := func(n ast.Node, parent int32) int32 {
		id := int32(len(t.Parent))
		d := int32(0)
		if parent >= 0 {
			d = t.Depth[parent] + 1
		}
		t.Parent = append(t.Parent, parent)
		t.Depth = append(t.Depth, d)
		t.Kind = append(t.Kind, kindOf(n))
		return id
	}
	var stack []int32
	seen := map[*ast.CommentGroup]bool{}
	ast.Inspect(af, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return false
		}
		parent := int32(-1)
		if len(stack) > 0 {
			parent = stack[len(stack)-1]
		}
		id := add(n, parent)
		if id != 0 { // the file is node 0 of every byte already
			paint(id, n)
		}
		if cg, ok := n.(*ast.CommentGroup); ok {
			seen[cg] = true
		}
		stack = append(stack, id)
		return true
	})
	if !comments {
		return
	}
	// Free-floating comments (not a Doc or line comment of a node) are not
	// children of any node in go/ast: attach each group to the node that
	// holds its first byte, the innermost node around it.
	for _, cg := range af.Comments {
		if seen[cg] || !cg.Pos().IsValid() {
			continue
		}
		at := int(cg.Pos()) - base
		if at < 0 || at >= size {
			continue
		}
		gid := add(cg, f.ByteNode[at])
		paint(gid, cg)
		for _, c := range cg.List {
			paint(add(c, gid), c)
		}
	}
}
