package graphdata

import (
	"testing"
)

// FuzzGraph builds a graph from bytes (the first byte, as an int8, is n;
// then each two bytes, as int8s, are an edge) and checks NewGraph's result,
// ShortestPaths against Floyd–Warshall, the spatial relations and the
// Laplacian encoding.
func FuzzGraph(f *testing.F) {
	b := func(v ...int) []byte {
		out := make([]byte, len(v))
		for i, x := range v {
			out[i] = byte(int8(x))
		}
		return out
	}
	f.Add(b(4, 0, 1, 1, 2, 2, 3))                   // path
	f.Add(b(5, 0, 1, 1, 2, 2, 3, 3, 4, 4, 0))       // cycle
	f.Add(b(6, 0, 1, 2, 3))                         // components, isolated nodes
	f.Add(b(5, 0, 1, 0, 2, 1, 2, 2, 3, 3, 4, 2, 4)) // two triangles
	f.Add(b(1))                                     // one node
	f.Add(b(3, 0, 0))                               // self-loop
	f.Add(b(3, 0, 1, 1, 0))                         // duplicate
	f.Add(b(3, 0, 9))                               // out of range
	f.Add(b(3, -1, 2))                              // negative endpoint
	f.Add(b(0))                                     // empty
	f.Add(b(-5))                                    // negative size
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		n := int(int8(data[0]))
		var edges [][2]int
		for i := 1; i+1 < len(data); i += 2 {
			edges = append(edges, [2]int{int(int8(data[i])), int(int8(data[i+1]))})
		}
		g, err := NewGraph(n, edges)
		if err != nil {
			if g != nil {
				t.Fatal("graph and error")
			}
			return
		}
		if err := g.Check(n); err != nil {
			t.Fatal(err)
		}
		if g.NumEdges() != len(edges) {
			t.Fatalf("%d edges, given %d", g.NumEdges(), len(edges))
		}
		d := ShortestPaths(g)
		want := floyd(g)
		for i := range d {
			if d[i] != want[i] || d[i] != d[(i%n)*n+i/n] {
				t.Fatalf("distances %v, Floyd–Warshall %v", d, want)
			}
		}
		rel, err := SpatialRelations(g, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rel {
			if r < 0 || r >= NumSpatialRelations(3) {
				t.Fatalf("relation %d outside [0, %d)", r, NumSpatialRelations(3))
			}
		}
		pe, err := LaplacianPE(g, 4)
		if err != nil || len(pe) != 4*n {
			t.Fatalf("Laplacian encoding: %d values, %v", len(pe), err)
		}
	})
}
