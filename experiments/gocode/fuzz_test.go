package gocode

import "testing"

// FuzzRelations parses random sources; for those that parse it checks the
// file's invariants (checkFile) and the relations of a window against a
// naive LCA, with and without comment nodes.
func FuzzRelations(f *testing.F) {
	for _, s := range []string{
		"package p; func f() { return }",
		"package p\n\n// Doc.\nfunc (r *T) M(a, b int) (int, error) {\n\t/* free */ return a + b, nil // line\n}\n",
		"package p\ntype T[K comparable, V any] struct{ m map[K]V; next *T[K, V] }\n",
		"package p\nvar x = []struct{ a int }{{1}, {a: 2}}\nfunc g() { for i := range 3 { go func() { defer recover() }(); _ = i } }\n",
		"package p\nimport (\"fmt\"; . \"os\")\nfunc h(ch chan<- int) { select { case ch <- 1: default: }; switch x := any(1).(type) { case int: fmt.Println(x) } }\n",
		"package p\n/* unterminated",
	} {
		f.Add(s, uint16(0), uint16(32), uint8(3), uint8(2))
		f.Add(s, uint16(7), uint16(200), uint8(0), uint8(8))
	}
	f.Fuzz(func(t *testing.T, src string, start, n uint16, maxUp, maxDown uint8) {
		for _, comments := range []bool{false, true} {
			file, err := ParseFile("fuzz.go", []byte(src), comments)
			if err != nil {
				return
			}
			checkFile(t, file, comments)
			size := len(file.Src)
			w := 1 + int(n)%min(size, 64)
			s := int(start) % (size - w + 1)
			checkAgainstNaive(t, &file.Tree, file.ByteNode, s, w, int(maxUp)%12, int(maxDown)%12)
		}
	})
}
