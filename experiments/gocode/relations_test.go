package gocode

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// naiveRelation climbs from a and b to their lowest common ancestor.
func naiveRelation(t *Tree, a, b int32) (up, down int) {
	for t.Depth[a] > t.Depth[b] {
		a, up = t.Parent[a], up+1
	}
	for t.Depth[b] > t.Depth[a] {
		b, down = t.Parent[b], down+1
	}
	for a != b {
		a, b, up, down = t.Parent[a], t.Parent[b], up+1, down+1
	}
	return up, down
}

// randomTree returns a tree of n nodes: each node's parent is drawn from
// the last `reach` nodes, so that small reaches give deep trees.
func randomTree(rng *rand.Rand, n, reach int) *Tree {
	t := &Tree{Parent: make([]int32, n), Depth: make([]int32, n), Kind: make([]uint8, n)}
	t.Parent[0] = -1
	for i := 1; i < n; i++ {
		lo := max(0, i-reach)
		p := int32(lo + rng.IntN(i-lo))
		t.Parent[i], t.Depth[i] = p, t.Depth[p]+1
	}
	return t
}

func checkAgainstNaive(t *testing.T, tree *Tree, byteNode []int32, start, n, maxUp, maxDown int) {
	t.Helper()
	dst := make([]int, n*n)
	if err := Relations(tree, byteNode, start, n, maxUp, maxDown, dst); err != nil {
		t.Fatal(err)
	}
	num := NumTreeRelations(maxUp, maxDown)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			up, down := naiveRelation(tree, byteNode[start+i], byteNode[start+j])
			want := min(up, maxUp)*(maxDown+1) + min(down, maxDown)
			got := dst[i*n+j]
			if got != want || got < 0 || got >= num {
				t.Fatalf("window %d+%d: relation (%d, %d) = %d, want %d (up %d down %d, clip %d/%d)",
					start, n, i, j, got, want, up, down, maxUp, maxDown)
			}
		}
	}
}

func TestRelationsRandomTrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		nodes, reach, bytes, window, maxUp, maxDown int
	}{
		{1, 1, 10, 10, 0, 0},
		{2, 1, 20, 7, 3, 3},
		{50, 3, 300, 64, 8, 8},    // deep
		{50, 50, 300, 64, 2, 5},   // bushy, clipped
		{400, 2, 2000, 256, 8, 8}, // deep, a training-size window
		{400, 400, 1000, 100, 16, 1},
	} {
		tree := randomTree(rng, tc.nodes, tc.reach)
		if err := tree.Check(); err != nil {
			t.Fatal(err)
		}
		// Bytes in runs of one node, as in source.
		bn := make([]int32, tc.bytes)
		for i := 0; i < tc.bytes; {
			v := int32(rng.IntN(tc.nodes))
			for r := 1 + rng.IntN(4); r > 0 && i < tc.bytes; r-- {
				bn[i] = v
				i++
			}
		}
		for k := 0; k < 3; k++ {
			start := rng.IntN(tc.bytes - tc.window + 1)
			checkAgainstNaive(t, tree, bn, start, tc.window, tc.maxUp, tc.maxDown)
		}
	}
}

func TestRelationIDs(t *testing.T) {
	for _, tc := range []struct{ up, down, maxUp, maxDown, id int }{
		{0, 0, 8, 8, 0},
		{0, 3, 8, 8, 3},
		{2, 1, 8, 8, 19},
		{20, 20, 8, 8, 80},
		{20, 0, 2, 5, 12},
	} {
		if got := RelationID(tc.up, tc.down, tc.maxUp, tc.maxDown); got != tc.id {
			t.Errorf("RelationID(%d, %d, %d, %d) = %d, want %d", tc.up, tc.down, tc.maxUp, tc.maxDown, got, tc.id)
		}
		u, d := UpDown(tc.id, tc.maxDown)
		if u != min(tc.up, tc.maxUp) || d != min(tc.down, tc.maxDown) {
			t.Errorf("UpDown(%d, %d) = (%d, %d)", tc.id, tc.maxDown, u, d)
		}
	}
	if n := NumTreeRelations(8, 8); n != 81 {
		t.Errorf("NumTreeRelations(8, 8) = %d, want 81", n)
	}
	if n := NumTreeRelations(-1, 8); n != 0 {
		t.Errorf("NumTreeRelations(-1, 8) = %d, want 0", n)
	}
}

func TestRelationsErrors(t *testing.T) {
	tree := &Tree{Parent: []int32{-1, 0, 1}, Depth: []int32{0, 1, 2}}
	bad := &Tree{Parent: []int32{-1, 0, 1}, Depth: []int32{0, 1, 5}}
	bn := []int32{0, 1, 2, 2}
	for _, tc := range []struct {
		name          string
		tree          *Tree
		bn            []int32
		start, n      int
		up, down, dst int
		want          string
	}{
		{"nil tree", nil, bn, 0, 2, 1, 1, 4, "malformed tree"},
		{"zero window", tree, bn, 0, 0, 1, 1, 0, "positive length"},
		{"past end", tree, bn, 3, 2, 1, 1, 4, "outside the file"},
		{"negative start", tree, bn, -1, 2, 1, 1, 4, "outside the file"},
		{"short dst", tree, bn, 0, 2, 1, 1, 3, "want n*n = 4"},
		{"negative bound", tree, bn, 0, 2, -1, 1, 4, "must not be negative"},
		{"node outside", tree, []int32{0, 7}, 0, 2, 1, 1, 4, "outside the tree"},
		{"bad depths", bad, bn, 0, 4, 1, 1, 16, "depth"},
	} {
		err := Relations(tc.tree, tc.bn, tc.start, tc.n, tc.up, tc.down, make([]int, tc.dst))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
