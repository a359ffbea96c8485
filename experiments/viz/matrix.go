package viz

import (
	"math"

	"github.com/pkg/errors"
)

// Matrix is a row-major grid of values: row r, column c holds
// Data[r*Cols+c]. Heatmap draws column c at x = X0+c and row r at y = Y0+r
// (row 0 on top), so the axes can show positions or distances.
type Matrix struct {
	Rows, Cols int
	Data       []float64
	X0, Y0     float64
}

// NewMatrix returns the rows×cols matrix over data (not copied). It
// returns an error if the sizes disagree or are not positive.
func NewMatrix(rows, cols int, data []float64) (Matrix, error) {
	m := Matrix{Rows: rows, Cols: cols, Data: data}
	return m, m.check()
}

// FromInts returns the rows×cols matrix of the integers idx (an index or
// bucket matrix such as posenc.ShawIndex's), converted to float64.
func FromInts(rows, cols int, idx []int) (Matrix, error) {
	d := make([]float64, len(idx))
	for i, v := range idx {
		d[i] = float64(v)
	}
	return NewMatrix(rows, cols, d)
}

func (m Matrix) check() error {
	if m.Rows <= 0 || m.Cols <= 0 || len(m.Data) != m.Rows*m.Cols {
		return errors.Errorf("viz: matrix %d×%d with %d values, want positive sizes and rows·cols values", m.Rows, m.Cols, len(m.Data))
	}
	return nil
}

// At returns the value at row r, column c.
func (m Matrix) At(r, c int) float64 { return m.Data[r*m.Cols+c] }

// Row returns a copy of row r.
func (m Matrix) Row(r int) []float64 {
	return append([]float64(nil), m.Data[r*m.Cols:(r+1)*m.Cols]...)
}

// Xs returns the x coordinates of the columns, X0..X0+Cols-1.
func (m Matrix) Xs() []float64 { return seq(m.X0, m.Cols) }

// Ys returns the y coordinates of the rows, Y0..Y0+Rows-1.
func (m Matrix) Ys() []float64 { return seq(m.Y0, m.Rows) }

// MaskCausal returns a copy of m with NaN where the column's coordinate
// exceeds the row's (key position after query position, when X0 and Y0
// are the key and query start positions as ScoreBias sets them): the
// entries a causal mask hides.
func (m Matrix) MaskCausal() Matrix {
	out := m
	out.Data = append([]float64(nil), m.Data...)
	for r := 0; r < m.Rows; r++ {
		for c := 0; c < m.Cols; c++ {
			if m.X0+float64(c) > m.Y0+float64(r) {
				out.Data[r*m.Cols+c] = math.NaN()
			}
		}
	}
	return out
}

// Range returns the smallest and largest non-NaN values of the matrices
// (NaN, NaN if there are none).
func Range(ms ...Matrix) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, m := range ms {
		for _, v := range m.Data {
			if math.IsNaN(v) {
				continue
			}
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if lo > hi {
		return math.NaN(), math.NaN()
	}
	return lo, hi
}

func seq(start float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = start + float64(i)
	}
	return out
}
