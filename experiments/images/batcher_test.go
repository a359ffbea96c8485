package images

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"
)

// labelled returns a dataset of n 2×2 images whose pixels all hold i/n and
// whose labels are i%10, so a batch tells which images it holds.
func labelled(n int) *Dataset {
	ds := &Dataset{N: n, Rows: 2, Cols: 2, Classes: 10, Images: make([]float32, 4*n), Labels: make([]int, n)}
	for i := 0; i < n; i++ {
		for k := 0; k < 4; k++ {
			ds.Images[4*i+k] = float32(i) / float32(n)
		}
		ds.Labels[i] = i % 10
	}
	return ds
}

// drawn returns the image indices of the next batch of a NoNorm batcher
// over labelled(n).
func drawn(t *testing.T, b *Batcher) []int {
	t.Helper()
	B, T, D := b.Shape()
	x, l := make([]float32, B*T*D), make([]int, B)
	if err := b.Next(x, l); err != nil {
		t.Fatal(err)
	}
	n := b.ds.N
	out := make([]int, B)
	for i := range out {
		out[i] = int(x[i*T*D]*float32(n) + 0.5)
		if l[i] != out[i]%10 {
			t.Fatalf("label %d for image %d", l[i], out[i])
		}
	}
	return out
}

func TestBatcherEpochs(t *testing.T) {
	ds := labelled(10)
	b, err := NewBatcher(ds, BatcherOptions{Batch: 4, Patch: 1, Seed: 3, Norm: NoNorm})
	if err != nil {
		t.Fatal(err)
	}
	var seq []int
	for range 10 { // 40 images: 4 epochs
		seq = append(seq, drawn(t, b)...)
	}
	for e := 0; e < 4; e++ {
		seen := make([]bool, 10)
		for _, i := range seq[10*e : 10*e+10] {
			if seen[i] {
				t.Fatalf("epoch %d draws image %d twice: %v", e, i, seq[10*e:10*e+10])
			}
			seen[i] = true
		}
	}
	if slices.Equal(seq[:10], seq[10:20]) || slices.Equal(seq[:10], []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Errorf("epochs not shuffled: %v", seq[:20])
	}
	if e, k := b.Epoch(); e != 3 || k != 10 {
		t.Errorf("Epoch() = %d, %d; want 3, 10", e, k)
	}
	// Same seed, same sequence; another seed, another.
	b2, _ := NewBatcher(ds, BatcherOptions{Batch: 4, Patch: 1, Seed: 3, Norm: NoNorm})
	b3, _ := NewBatcher(ds, BatcherOptions{Batch: 4, Patch: 1, Seed: 4, Norm: NoNorm})
	var s2, s3 []int
	for range 10 {
		s2 = append(s2, drawn(t, b2)...)
		s3 = append(s3, drawn(t, b3)...)
	}
	if !slices.Equal(seq, s2) || slices.Equal(seq, s3) {
		t.Errorf("seed 3 twice: %v, %v; seed 4: %v", seq[:8], s2[:8], s3[:8])
	}
}

// TestBatcherResume saves the state after every batch, restores it into a
// fresh batcher and checks it continues the same sequence, including across
// epoch boundaries.
func TestBatcherResume(t *testing.T) {
	ds := labelled(7)
	o := BatcherOptions{Batch: 3, Patch: 1, Seed: 11, Norm: NoNorm}
	ref, _ := NewBatcher(ds, o)
	var want [][]int
	var states [][]byte
	for range 12 {
		s, err := ref.State()
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, s)
		want = append(want, drawn(t, ref))
	}
	for k, s := range states {
		b, _ := NewBatcher(ds, BatcherOptions{Batch: 3, Patch: 1, Seed: 99, Norm: NoNorm})
		drawn(t, b) // move it away from its start
		if err := b.SetState(s); err != nil {
			t.Fatal(err)
		}
		for j := k; j < len(want); j++ {
			if got := drawn(t, b); !slices.Equal(got, want[j]) {
				t.Fatalf("restored at batch %d: batch %d is %v, want %v", k, j, got, want[j])
			}
		}
	}
}

func TestBatcherCorruptState(t *testing.T) {
	ds := labelled(7)
	b, _ := NewBatcher(ds, BatcherOptions{Batch: 3, Patch: 1, Seed: 1, Norm: NoNorm})
	drawn(t, b)
	good, _ := b.State()
	before := drawn(t, b)
	b.SetState(good)
	edit := func(f func(s []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, tc := range []struct {
		name string
		s    []byte
		want string
	}{
		{"empty", nil, "corrupt state: 0 bytes"},
		{"magic", edit(func(s []byte) []byte { s[0] = 'x'; return s }), "not a batcher state"},
		{"other dataset", edit(func(s []byte) []byte { binary.LittleEndian.PutUint64(s[8:], 8); return s }), "dataset of 8 images, this one has 7"},
		{"position", edit(func(s []byte) []byte { binary.LittleEndian.PutUint64(s[24:], 8); return s }), "position 8 of 7"},
		{"truncated", good[:len(good)-1], "corrupt state: generator state"},
		{"trailing", append(append([]byte(nil), good...), 0), "corrupt state: generator state"},
		{"generator", edit(func(s []byte) []byte { s[40] = 'x'; return s }), "restoring generator state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, b.SetState(tc.s), tc.want)
			// A refused state changes nothing.
			if got := drawn(t, b); !slices.Equal(got, before) {
				t.Fatalf("after the refused state: %v, want %v", got, before)
			}
			b.SetState(good)
		})
	}
	other, _ := NewBatcher(labelled(8), BatcherOptions{Batch: 3, Patch: 1})
	wantErr(t, other.SetState(good), "dataset of 7 images, this one has 8")
}

func TestBatcherBatch(t *testing.T) {
	ds := synth(t, 5, 4, 6, 1)
	b, err := NewBatcher(ds, BatcherOptions{Batch: 2, Patch: 2, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	if o := b.Options(); o.Norm != MNISTNorm {
		t.Errorf("default norm %+v, want MNISTNorm", o.Norm)
	}
	B, T, D := b.Shape()
	if gr, gc := b.Grid(); B != 2 || T != 6 || D != 4 || gr != 2 || gc != 3 {
		t.Fatalf("shape %d %d %d grid %d %d", B, T, D, gr, gc)
	}
	s, _ := b.State()
	x, l := make([]float32, B*T*D), make([]int, B)
	if err := b.Next(x, l); err != nil {
		t.Fatal(err)
	}
	// The same images, raw, via PatchBatch: x = (raw - 0.1307)/0.3081.
	raw, _ := NewBatcher(ds, BatcherOptions{Batch: 2, Patch: 2, Seed: 5, Norm: NoNorm})
	raw.SetState(s)
	y, l2 := make([]float32, B*T*D), make([]int, B)
	raw.Next(y, l2)
	idx := raw.idx
	z := make([]float32, B*T*D)
	PatchBatch(ds, idx, 2, z)
	if !slices.Equal(y, z) || !slices.Equal(l, l2) || l[0] != ds.Labels[idx[0]] || l[1] != ds.Labels[idx[1]] {
		t.Fatalf("batch differs from PatchBatch of %v", idx)
	}
	for k := range x {
		if want := (z[k] - 0.1307) / 0.3081; x[k] != want {
			t.Fatalf("x[%d] = %v, want (%v-0.1307)/0.3081 = %v", k, x[k], z[k], want)
		}
	}
	wantErr(t, b.Next(x[1:], l), "x has length 47 and labels 2, want 48 (2x6x4) and 2")
	wantErr(t, b.Next(x, l[:1]), "want 48 (2x6x4) and 2")
}

func TestNewBatcherErrors(t *testing.T) {
	ds := synth(t, 3, 4, 4, 1)
	for _, tc := range []struct {
		o    BatcherOptions
		want string
	}{
		{BatcherOptions{Batch: 0, Patch: 2}, "batch size 0"},
		{BatcherOptions{Batch: 2, Patch: 3}, "image 4x4 is not divisible by patch size 3"},
		{BatcherOptions{Batch: 2, Patch: 2, Norm: Norm{Mean: 0.5}}, "std 0 must be positive"},
		{BatcherOptions{Batch: 2, Patch: 2, Norm: Norm{Mean: float32(math.Inf(1)), Std: 1}}, "mean +Inf must be finite"},
	} {
		_, err := NewBatcher(ds, tc.o)
		wantErr(t, err, tc.want)
	}
	bad := synth(t, 3, 4, 4, 1)
	bad.Labels[1] = 10
	_, err := NewBatcher(bad, BatcherOptions{Batch: 1, Patch: 1})
	wantErr(t, err, "label 10 of image 1")
}

func TestNormApply(t *testing.T) {
	x := []float32{0, 0.1307, 1}
	MNISTNorm.Apply(x)
	if x[1] != 0 || !closeFloats(x, []float32{-0.1307 / 0.3081, 0, 0.8693 / 0.3081}, 1e-6) {
		t.Fatal(x)
	}
	y := []float32{0.25}
	NoNorm.Apply(y)
	if y[0] != 0.25 {
		t.Fatal(y)
	}
}
