// Package posnames lists the trained position encodings of posenc in the
// order of the README's table, for the extrapolation study and the
// benchmark, which must not keep their own lists by hand.
//
// Interim: posenc.Trainable() is coming on another branch; once merged, the
// body of Trainable becomes `return posenc.Trainable()`.
package posnames

import (
	"slices"

	"github.com/rpe-go/rpe/posenc"
)

// tableOrder is the order of the README's table of encodings; names of
// posenc not listed here follow, alphabetically.
var tableOrder = []string{"none", "sinusoidal", "learned", "shaw", "shaw-scalar", "t5", "xl", "deberta", "rope", "alibi"}

// evalOnly are the evaluation-time scalings of RoPE: they run the trained
// "rope" model and are never trained themselves.
var evalOnly = []string{posenc.RopePI, posenc.RopeNTK, posenc.RopeDynamic, posenc.RopeYaRN}

// Trainable returns the encodings of posenc.Names() that are trained (every
// name except the RoPE scalings), the known ones in the README's table
// order, then unknown ones alphabetically. The slice is new on every call.
func Trainable() []string {
	names := posenc.Names() // sorted
	var out []string
	for _, n := range tableOrder {
		if slices.Contains(names, n) {
			out = append(out, n)
		}
	}
	for _, n := range names {
		if !slices.Contains(tableOrder, n) && !slices.Contains(evalOnly, n) {
			out = append(out, n)
		}
	}
	return out
}
