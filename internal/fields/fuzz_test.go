package fields

import "testing"

// FuzzSet checks that setting any field from any text never panics, and that
// a value that was accepted reads back (String) as text Set accepts again
// with the same result.
func FuzzSet(f *testing.F) {
	for _, s := range []string{"1", "-3", "0.5", "true", "x", "", "1e400", "NaN"} {
		f.Add("d-model", s)
		f.Add("scale", s)
		f.Add("causal", s)
	}
	f.Fuzz(func(t *testing.T, name, val string) {
		var o outer
		if err := Set(&o, name, val); err != nil {
			return
		}
		fld, err := Lookup(&o, name)
		if err != nil {
			t.Fatal(err)
		}
		s := fld.String()
		var o2 outer
		if err := Set(&o2, name, s); err != nil {
			t.Fatalf("%s=%q read back as %q, which Set refuses: %v", name, val, s, err)
		}
		if f2, _ := Lookup(&o2, name); f2.String() != s {
			t.Fatalf("%s: %q -> %q -> %q", name, val, s, f2.String())
		}
	})
}
