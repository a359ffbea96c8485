package graph

import (
	"fmt"

	"github.com/pkg/errors"
	"gorgonia.org/tensor"
)

// This file holds the head layouts shared by the fused attention ops
// (attention_probs.go, head_matmul.go, heads.go, transpose_last2.go).
// Queries, keys, values and outputs may be laid out with the heads split,
// [B, H, T, dh], or merged as a Linear produces them, [B, T, H*dh]; the ops
// address head h of batch element b in either layout with a leading
// dimension, so no transpose is materialised. The per-head products run on
// the package's BLAS, one (b, h) pair per task, split over Threads()
// goroutines.

// headLayout says where the [rows, cols] matrix of batch element b and head h
// lives in a tensor: [B, H, rows, cols] (split), or [B, rows, H*cols]
// (merged: the heads side by side along the last axis).
type headLayout struct {
	merged bool
	// shared: one [rows, cols] matrix per head for every batch element,
	// [H, rows, cols] (a table shared by the batch); a product written to
	// a shared layout sums over the batch.
	shared           bool
	b, h, rows, cols int
}

func (l headLayout) shape() tensor.Shape {
	if l.shared {
		return tensor.Shape{l.h, l.rows, l.cols}
	}
	if l.merged {
		return tensor.Shape{l.b, l.rows, l.h * l.cols}
	}
	return tensor.Shape{l.b, l.h, l.rows, l.cols}
}

// off is the offset of element (0, 0) of the matrix of (b, h).
func (l headLayout) off(b, h int) int {
	if l.shared {
		return h * l.rows * l.cols
	}
	if l.merged {
		return b*l.rows*l.h*l.cols + h*l.cols
	}
	return (b*l.h + h) * l.rows * l.cols
}

// ld is the distance between consecutive rows of a matrix.
func (l headLayout) ld() int {
	if l.merged && !l.shared {
		return l.h * l.cols
	}
	return l.cols
}

func (l headLayout) String() string {
	if l.shared {
		return fmt.Sprintf("[%d %d %d] shared by %d", l.h, l.rows, l.cols, l.b)
	}
	if l.merged {
		return fmt.Sprintf("[%d %d %d*%d]", l.b, l.rows, l.h, l.cols)
	}
	return fmt.Sprintf("[%d %d %d %d]", l.b, l.h, l.rows, l.cols)
}

// layoutOf returns the layout of a node of shape s: rank 4 is split
// [B, H, T, c]; rank 3 is merged [B, T, heads*c] (heads > 0 must divide the
// last dimension).
func layoutOf(op, what string, s tensor.Shape, heads int) (headLayout, error) {
	switch len(s) {
	case 4:
		return headLayout{b: s[0], h: s[1], rows: s[2], cols: s[3]}, nil
	case 3:
		if heads <= 0 || s[2]%heads != 0 {
			return headLayout{}, errors.Errorf("graph: %s: %s %v has merged heads [B, T, H*dh] but %d heads do not divide %d", op, what, s, heads, s[2])
		}
		return headLayout{merged: true, b: s[0], h: heads, rows: s[1], cols: s[2] / heads}, nil
	}
	return headLayout{}, errors.Errorf("graph: %s: %s %v must be [B, H, T, dh] or [B, T, H*dh]", op, what, s)
}
