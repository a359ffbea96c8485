package trainer

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestCorpusSplit(t *testing.T) {
	for _, n := range []int{2, 3, 10, 100, 1001} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i)
		}
		c, err := NewCorpus(data)
		if err != nil {
			t.Fatal(err)
		}
		want := n * 9 / 10
		if want == n {
			want--
		}
		if want == 0 {
			want = 1
		}
		if len(c.Train) != want || len(c.Val) != n-want {
			t.Errorf("n=%d: split %d/%d, want %d/%d", n, len(c.Train), len(c.Val), want, n-want)
		}
		if !bytes.Equal(append(append([]byte(nil), c.Train...), c.Val...), data) {
			t.Errorf("n=%d: train+val is not the corpus", n)
		}
	}
	if c, _ := NewCorpus(make([]byte, 1000)); len(c.Train) != 900 || len(c.Val) != 100 {
		t.Errorf("1000 bytes: split %d/%d, want 900/100", len(c.Train), len(c.Val))
	}
}

func TestLoadCorpusErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := LoadCorpus(filepath.Join(dir, "nope.txt"))
	wantErr(t, err, "nope.txt", "no such file")

	empty := filepath.Join(dir, "empty.txt")
	os.WriteFile(empty, nil, 0o644)
	_, err = LoadCorpus(empty)
	wantErr(t, err, "empty.txt", "empty")

	short := filepath.Join(dir, "short.txt")
	os.WriteFile(short, []byte("0123456789abcdefghij"), 0o644) // 18 train, 2 val bytes
	c, err := LoadCorpus(short)
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != short {
		t.Errorf("path %q", c.Path)
	}
	wantErr(t, c.CheckWindow(8), "short.txt", "validation", "2 bytes", "seq len 8")
	wantErr(t, c.CheckWindow(20), "training part has 18 bytes")
	if err := c.CheckWindow(1); err != nil {
		t.Errorf("window 1: %v", err)
	}
	// New refuses a corpus too short for the window.
	cfg := tinyConfig()
	_, err = New(cfg, c)
	wantErr(t, err, "too short")
}

func TestDefaultCorpus(t *testing.T) {
	p := DefaultCorpusPath()
	if filepath.Base(p) != "Isaac.Newton-Opticks.txt" {
		t.Fatalf("default corpus %q", p)
	}
	c, err := LoadCorpus("")
	if err != nil {
		t.Fatal(err)
	}
	n := len(c.Train) + len(c.Val)
	if len(c.Train) != n*9/10 || n < 500000 {
		t.Errorf("default corpus: %d bytes, train %d", n, len(c.Train))
	}
}

func TestBatcher(t *testing.T) {
	data := tinyText()
	const b, l = 3, 8
	next := func(bt *Batcher) ([]int, []int) {
		ids, tg := make([]int, b*l), make([]int, b*l)
		bt.Next(ids, tg)
		return ids, tg
	}
	b1, _ := NewBatcher(data, b, l, 7)
	b2, _ := NewBatcher(data, b, l, 7)
	b3, _ := NewBatcher(data, b, l, 8)
	same, diff := true, false
	for k := 0; k < 5; k++ {
		i1, t1 := next(b1)
		i2, t2 := next(b2)
		i3, _ := next(b3)
		for i := range i1 {
			same = same && i1[i] == i2[i] && t1[i] == t2[i]
			diff = diff || i1[i] != i3[i]
		}
		// Each row is a window of the data, targets shifted by one.
		for r := 0; r < b; r++ {
			w := make([]byte, l+1)
			for j := 0; j < l; j++ {
				w[j] = byte(i1[r*l+j])
				if j > 0 && t1[r*l+j-1] != i1[r*l+j] {
					t.Fatalf("row %d: targets are not the inputs shifted", r)
				}
			}
			w[l] = byte(t1[r*l+l-1])
			if !bytes.Contains(data, w) {
				t.Fatalf("row %d %q is not a window of the data", r, w)
			}
		}
	}
	if !same {
		t.Error("same seed gave different batches")
	}
	if !diff {
		t.Error("different seeds gave the same batches")
	}

	// Saving and restoring the state replays the same batches.
	st, err := b1.State()
	if err != nil {
		t.Fatal(err)
	}
	a1, a2 := next(b1)
	b4, _ := NewBatcher(data, b, l, 99)
	if err := b4.SetState(st); err != nil {
		t.Fatal(err)
	}
	c1, c2 := next(b4)
	for i := range a1 {
		if a1[i] != c1[i] || a2[i] != c2[i] {
			t.Fatal("restored batcher differs")
		}
	}
	wantErr(t, b4.SetState([]byte("junk")), "batcher")

	// Every offset, including the last, is reachable: with exactly T+1
	// bytes there is one window.
	small := data[:l+1]
	bs, err := NewBatcher(small, 2, l, 1)
	if err != nil {
		t.Fatal(err)
	}
	i5, t5 := next2(bs, 2, l)
	for j := 0; j < l; j++ {
		if i5[j] != int(small[j]) || t5[j] != int(small[j+1]) {
			t.Fatal("single-window batch wrong")
		}
	}
	_, err = NewBatcher(data[:l], 1, l, 1)
	wantErr(t, err, "too short")
}

func next2(bt *Batcher, b, l int) ([]int, []int) {
	ids, tg := make([]int, b*l), make([]int, b*l)
	bt.Next(ids, tg)
	return ids, tg
}
