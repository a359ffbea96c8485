package gocode_test

import (
	"fmt"

	"github.com/rpe-go/rpe/experiments/gocode"
)

// The tree relations of a one-line file: its bytes grouped by their
// innermost node, then the (up, down) steps from the "return" statement to
// every group (the row of a query byte in "return").
func Example() {
	src := []byte("package p; func f() { return }")
	f, err := gocode.ParseFile("p.go", src, false)
	if err != nil {
		fmt.Println(err)
		return
	}
	n := len(src)
	rel := make([]int, n*n)
	const maxUp, maxDown = 4, 4
	if err := gocode.Relations(&f.Tree, f.ByteNode, 0, n, maxUp, maxDown, rel); err != nil {
		fmt.Println(err)
		return
	}
	q := 22 // the 'r' of return
	for i := 0; i < n; {
		j := i
		for j < n && f.ByteNode[j] == f.ByteNode[i] {
			j++
		}
		node := f.ByteNode[i]
		up, down := gocode.UpDown(rel[q*n+i], maxDown)
		fmt.Printf("%-10q %-10s depth %d  from return: up %d down %d\n",
			src[i:j], gocode.KindName(f.Tree.Kind[node]), f.Tree.Depth[node], up, down)
		i = j
	}
	// Output:
	// "package " File       depth 0  from return: up 3 down 0
	// "p"        Ident      depth 1  from return: up 3 down 1
	// "; "       File       depth 0  from return: up 3 down 0
	// "func "    FuncType   depth 2  from return: up 2 down 1
	// "f"        Ident      depth 2  from return: up 2 down 1
	// "()"       FieldList  depth 3  from return: up 2 down 2
	// " "        FuncDecl   depth 1  from return: up 2 down 0
	// "{ "       BlockStmt  depth 2  from return: up 1 down 0
	// "return"   ReturnStmt depth 3  from return: up 0 down 0
	// " }"       BlockStmt  depth 2  from return: up 1 down 0
}
