package optim

import (
	"math"
	"testing"

	"gorgonia.org/tensor"
)

func vec64(x ...float64) *tensor.Dense {
	return tensor.New(tensor.WithShape(len(x)), tensor.WithBacking(append([]float64(nil), x...)))
}

func vec32(x ...float32) *tensor.Dense {
	return tensor.New(tensor.WithShape(len(x)), tensor.WithBacking(append([]float32(nil), x...)))
}

// set64 overwrites the data of a Float64 tensor.
func set64(t *tensor.Dense, x ...float64) { copy(t.Data().([]float64), x) }

func set32(t *tensor.Dense, x ...float32) { copy(t.Data().([]float32), x) }

// checkClose fails the test unless got and want agree within tol, elementwise.
func checkClose(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d elements, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !(math.Abs(got[i]-want[i]) <= tol) {
			t.Errorf("%s[%d] = %.17g, want %.17g (|diff| %.3g > %.3g)", what, i, got[i], want[i], math.Abs(got[i]-want[i]), tol)
		}
	}
}

func as64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

func allZero(t tensor.Tensor) bool {
	d, err := floats(t)
	if err != nil {
		panic(err)
	}
	switch g := d.(type) {
	case []float32:
		for _, x := range g {
			if x != 0 {
				return false
			}
		}
	case []float64:
		for _, x := range g {
			if x != 0 {
				return false
			}
		}
	}
	return true
}
