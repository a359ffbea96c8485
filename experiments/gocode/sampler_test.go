package gocode

import (
	"slices"
	"strings"
	"testing"
)

func testCorpus(t *testing.T) *Corpus {
	t.Helper()
	o := DefaultOptions()
	o.ValFrac, o.TestFrac = 0.25, 0.25
	o.MaxUp, o.MaxDown = 3, 2
	c, err := LoadCorpus(sampleTree(t), o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSamplerWindows(t *testing.T) {
	c := testCorpus(t)
	const b, l = 4, 16
	s, err := NewSampler(c, Train, b, l, 7)
	if err != nil {
		t.Fatal(err)
	}
	if s.NumRelations() != 12 {
		t.Errorf("%d relations, want 12", s.NumRelations())
	}
	ids, tg, rel := make([]int, b*l), make([]int, b*l), make([]int, b*l*l)
	wantRel := make([]int, l*l)
	for step := 0; step < 20; step++ {
		if err := s.Next(ids, tg, rel); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < b; i++ {
			w := ids[i*l : (i+1)*l]
			// The window is l+1 consecutive bytes of one training file.
			var found *File
			off := -1
			for _, f := range c.Files[Train] {
				for o := 0; o+l+1 <= len(f.Src); o++ {
					if sameBytes(f.Src[o:o+l], w) && sameBytes(f.Src[o+1:o+l+1], tg[i*l:(i+1)*l]) {
						found, off = f, o
						break
					}
				}
				if found != nil {
					break
				}
			}
			if found == nil {
				t.Fatalf("step %d window %d is not inside one training file: %q", step, i, bytesOf(w))
			}
			if err := Relations(&found.Tree, found.ByteNode, off, l, 3, 2, wantRel); err != nil {
				t.Fatal(err)
			}
			// Identical text may sit at several offsets; the first match
			// must then have the same relations only if the trees agree, so
			// compare only when the match is unique.
			if unique(c.Files[Train], w, tg[i*l:(i+1)*l]) && !slices.Equal(wantRel, rel[i*l*l:(i+1)*l*l]) {
				t.Fatalf("step %d window %d: relations differ from Relations at %s+%d", step, i, found.Path, off)
			}
		}
	}
}

func sameBytes(b []byte, ids []int) bool {
	for i, v := range b {
		if int(v) != ids[i] {
			return false
		}
	}
	return true
}

func bytesOf(ids []int) []byte {
	b := make([]byte, len(ids))
	for i, v := range ids {
		b[i] = byte(v)
	}
	return b
}

func unique(files []*File, ids, tg []int) bool {
	n := 0
	for _, f := range files {
		for o := 0; o+len(ids)+1 <= len(f.Src); o++ {
			if sameBytes(f.Src[o:o+len(ids)], ids) && sameBytes(f.Src[o+1:o+len(ids)+1], tg) {
				n++
			}
		}
	}
	return n == 1
}

func TestSamplerResume(t *testing.T) {
	c := testCorpus(t)
	const b, l = 3, 8
	next := func(s *Sampler) []int {
		ids, tg, rel := make([]int, b*l), make([]int, b*l), make([]int, b*l*l)
		if err := s.Next(ids, tg, rel); err != nil {
			t.Fatal(err)
		}
		return slices.Concat(ids, tg, rel)
	}
	a, _ := NewSampler(c, Train, b, l, 1)
	next(a)
	st, err := a.State()
	if err != nil {
		t.Fatal(err)
	}
	want := next(a)
	r, _ := NewSampler(c, Train, b, l, 99)
	if err := r.SetState(st); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(next(r), want) {
		t.Error("restored sampler draws another batch")
	}
	other, _ := NewSampler(c, Train, b, l, 2)
	if slices.Equal(next(other), want) {
		t.Error("seeds 1 and 2 draw the same second batch")
	}
	// Bad states leave the sampler unchanged.
	before, _ := r.State()
	shape, _ := NewSampler(c, Train, b, l+1, 1)
	stShape, _ := shape.State()
	o := c.Opts
	o.MaxUp = 4
	c2 := *c
	c2.Opts = o
	hashed, _ := NewSampler(&c2, Train, b, l, 1)
	stHash, _ := hashed.State()
	for _, tc := range []struct {
		name  string
		state []byte
		want  string
	}{
		{"empty", nil, "not a gocode sampler state"},
		{"truncated", st[:len(st)-3], "corrupt generator state"},
		{"garbage", []byte(strings.Repeat("x", len(st))), "not a gocode sampler state"},
		{"flipped generator", append(st[:len(st)-20:len(st)-20], []byte("nonsense-nonsense!!!")...), "corrupt generator state"},
		{"other shape", stShape, "length 9"},
		{"other bounds", stHash, "bounds up 4"},
	} {
		err := r.SetState(tc.state)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
		if now, _ := r.State(); !slices.Equal(now, before) {
			t.Errorf("%s: a refused state changed the sampler", tc.name)
		}
	}
	// Another corpus, same shape.
	c3 := *c
	c3.Files[Train] = c.Files[Train][1:]
	other3, _ := NewSampler(&c3, Train, b, l, 1)
	if err := other3.SetState(st); err == nil || !strings.Contains(err.Error(), "corpus") {
		t.Errorf("state of another corpus: error %v", err)
	}
}

func TestSamplerErrors(t *testing.T) {
	c := testCorpus(t)
	for _, tc := range []struct {
		name string
		c    *Corpus
		s    Split
		b, l int
		want string
	}{
		{"nil corpus", nil, Train, 1, 4, "nil corpus"},
		{"split", c, Split(5), 1, 4, "no split"},
		{"batch", c, Train, 0, 4, "must be positive"},
		{"length", c, Train, 1, -4, "must be positive"},
		{"too long", c, Train, 1, 1000, "has 1000+1 bytes"},
	} {
		if _, err := NewSampler(tc.c, tc.s, tc.b, tc.l, 1); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	s, _ := NewSampler(c, Train, 2, 4, 1)
	if err := s.Next(make([]int, 8), make([]int, 8), make([]int, 31)); err == nil || !strings.Contains(err.Error(), "B*L*L = 32") {
		t.Errorf("short rel: error %v", err)
	}
	f := c.Files[Train][0]
	if err := Window(f, len(f.Src)-4, 4, 1, 1, make([]int, 4), make([]int, 4), make([]int, 16)); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Errorf("window past the end: error %v", err)
	}
}
