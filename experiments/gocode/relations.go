package gocode

import (
	"sort"

	"github.com/pkg/errors"
)

// NumTreeRelations returns the number of relation ids for clipping bounds
// maxUp and maxDown: (maxUp+1)*(maxDown+1). It returns 0 if a bound is
// negative.
func NumTreeRelations(maxUp, maxDown int) int {
	if maxUp < 0 || maxDown < 0 {
		return 0
	}
	return (maxUp + 1) * (maxDown + 1)
}

// RelationID returns the id of the clipped pair (up, down):
// min(up, maxUp)*(maxDown+1) + min(down, maxDown).
func RelationID(up, down, maxUp, maxDown int) int {
	return min(up, maxUp)*(maxDown+1) + min(down, maxDown)
}

// UpDown returns the clipped (up, down) pair of relation id (the inverse of
// RelationID).
func UpDown(id, maxDown int) (up, down int) { return id / (maxDown + 1), id % (maxDown + 1) }

// Relations fills dst [n, n] (row-major; row = query byte i, column = key
// byte j, the layout of posenc.NewPairwise) with the tree relations of the
// n bytes byteNode[start : start+n] of a file whose syntax tree is tree: with
// a = byteNode[start+i], b = byteNode[start+j] and c their lowest common
// ancestor, up = Depth[a]-Depth[c] and down = Depth[b]-Depth[c], and
// dst[i*n+j] = RelationID(up, down, maxUp, maxDown), in
// [0, NumTreeRelations(maxUp, maxDown)). Bytes of the same node have
// relation 0; the relation of (j, i) is that of (i, j) with up and down
// swapped (before clipping).
//
// The window's distinct nodes are found first (consecutive bytes mostly
// share one), and the LCA of two of them by a binary search on their root
// paths, so the cost is O(k² log depth + n²) for k distinct nodes, with no
// per-file index to store.
//
// It returns an error if n is not positive, the window leaves byteNode,
// dst does not have n*n elements, a bound is negative, or a node is not in
// tree or tree's depths do not match its parents.
func Relations(tree *Tree, byteNode []int32, start, n int, maxUp, maxDown int, dst []int) error {
	if tree == nil || len(tree.Parent) == 0 || len(tree.Depth) != len(tree.Parent) {
		return errors.New("gocode: relations: empty or malformed tree")
	}
	if n <= 0 {
		return errors.Errorf("gocode: relations: window of %d bytes, want a positive length", n)
	}
	if start < 0 || start > len(byteNode)-n {
		return errors.Errorf("gocode: relations: window [%d, %d) is outside the file's %d bytes", start, start+n, len(byteNode))
	}
	if len(dst) != n*n {
		return errors.Errorf("gocode: relations: dst has %d elements, want n*n = %d", len(dst), n*n)
	}
	if maxUp < 0 || maxDown < 0 {
		return errors.Errorf("gocode: relations: clipping bounds up %d and down %d must not be negative", maxUp, maxDown)
	}
	win := byteNode[start : start+n]
	// Distinct nodes, in order of first appearance; slot[i] indexes them.
	var nodes []int32
	slot := make([]int32, n)
	index := map[int32]int32{}
	for i, v := range win {
		if i > 0 && v == win[i-1] {
			slot[i] = slot[i-1]
			continue
		}
		s, ok := index[v]
		if !ok {
			if v < 0 || int(v) >= len(tree.Parent) {
				return errors.Errorf("gocode: relations: byte %d has node %d, outside the tree's %d nodes", start+i, v, len(tree.Parent))
			}
			s = int32(len(nodes))
			index[v] = s
			nodes = append(nodes, v)
		}
		slot[i] = s
	}
	// Root path of each distinct node: paths[s][d] is its ancestor at depth d.
	k := len(nodes)
	paths := make([][]int32, k)
	for s, v := range nodes {
		d := tree.Depth[v]
		if d < 0 || int(d) >= len(tree.Parent) {
			return errors.Errorf("gocode: relations: node %d has depth %d", v, d)
		}
		p := make([]int32, d+1)
		for x := v; ; {
			p[tree.Depth[x]] = x
			if tree.Depth[x] == 0 {
				break
			}
			px := tree.Parent[x]
			if px < 0 || int(px) >= len(tree.Parent) || tree.Depth[px] != tree.Depth[x]-1 {
				return errors.Errorf("gocode: relations: node %d (depth %d) has parent %d, whose depth does not match", x, tree.Depth[x], px)
			}
			x = px
		}
		paths[s] = p
	}
	table := make([]int, k*k)
	for a := 0; a < k; a++ {
		pa := paths[a]
		table[a*k+a] = 0
		for b := a + 1; b < k; b++ {
			pb := paths[b]
			m := min(len(pa), len(pb))
			// Ancestors agree up to the LCA's depth and differ below it.
			c := sort.Search(m, func(d int) bool { return pa[d] != pb[d] }) - 1
			up, down := len(pa)-1-c, len(pb)-1-c
			table[a*k+b] = RelationID(up, down, maxUp, maxDown)
			table[b*k+a] = RelationID(down, up, maxUp, maxDown)
		}
	}
	for i := 0; i < n; i++ {
		row := table[int(slot[i])*k : int(slot[i]+1)*k]
		out := dst[i*n : (i+1)*n]
		for j := range out {
			out[j] = row[slot[j]]
		}
	}
	return nil
}
