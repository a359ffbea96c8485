package gocode

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"sort"

	"github.com/pkg/errors"
)

// samplerStream is the second PCG seed word of the sampler ("gocode").
const samplerStream = 0x676f636f6465

// samplerMagic starts every Sampler state.
const samplerMagic = "gocode-sampler/1"

// Window fills one window of l inputs of file f starting at byte off:
// ids[j] = Src[off+j], targets[j] = Src[off+j+1] (j < l), and rel [l, l]
// the tree relations of bytes off..off+l-1 (Relations). ids and targets
// must have l elements, rel l*l. It returns an error if the window of l+1
// bytes leaves the file or a slice has the wrong length.
func Window(f *File, off, l, maxUp, maxDown int, ids, targets, rel []int) error {
	if f == nil {
		return errors.New("gocode: window of a nil file")
	}
	if l <= 0 || off < 0 || off+l+1 > len(f.Src) {
		return errors.Errorf("gocode: window of %d+1 bytes at %d does not fit in %s (%d bytes)", l, off, f.Path, len(f.Src))
	}
	if len(ids) != l || len(targets) != l || len(rel) != l*l {
		return errors.Errorf("gocode: window of %d bytes: ids %d, targets %d and rel %d elements, want %d, %d and %d",
			l, len(ids), len(targets), len(rel), l, l, l*l)
	}
	for j := 0; j < l; j++ {
		ids[j] = int(f.Src[off+j])
		targets[j] = int(f.Src[off+j+1])
	}
	return Relations(&f.Tree, f.ByteNode, off, l, maxUp, maxDown, rel)
}

// Sampler draws training batches of a causal byte-level language model
// from one split: B windows of L inputs, each inside one file (windows do
// not cross file boundaries and are not padded), uniformly over all
// (file, offset) pairs with room for L+1 bytes, from a seeded PCG
// generator. Files shorter than L+1 bytes are never drawn. Windows may
// overlap. Its state can be saved and restored, so a resumed run sees the
// same batches.
type Sampler struct {
	files          []*File
	cum            []int64 // cum[i]: number of window starts in files[:i+1]
	b, l           int
	maxUp, maxDown int
	hash           string
	pcg            *rand.PCG
	rng            *rand.Rand
}

// NewSampler returns a Sampler over split s of c for batches of b windows
// of l bytes, relations clipped at c.Opts.MaxUp and c.Opts.MaxDown. It
// returns an error if b or l is not positive or no file of the split has
// l+1 bytes.
func NewSampler(c *Corpus, s Split, b, l int, seed uint64) (*Sampler, error) {
	if c == nil {
		return nil, errors.New("gocode: sampler of a nil corpus")
	}
	if s < Train || s > Test {
		return nil, errors.Errorf("gocode: sampler: no split %v", s)
	}
	if b <= 0 || l <= 0 {
		return nil, errors.Errorf("gocode: sampler: batch %d and window length %d must be positive", b, l)
	}
	sm := &Sampler{b: b, l: l, maxUp: c.Opts.MaxUp, maxDown: c.Opts.MaxDown, hash: c.Hash()}
	var total int64
	for _, f := range c.Files[s] {
		if n := len(f.Src) - l; n > 0 {
			total += int64(n)
			sm.files = append(sm.files, f)
			sm.cum = append(sm.cum, total)
		}
	}
	if total == 0 {
		return nil, errors.Errorf("gocode: sampler: no file of the %v split (%d files) has %d+1 bytes for one window", s, len(c.Files[s]), l)
	}
	sm.pcg = rand.NewPCG(seed, samplerStream)
	sm.rng = rand.New(sm.pcg)
	return sm, nil
}

// NumRelations returns the number of relation ids of the sampler's windows.
func (s *Sampler) NumRelations() int { return NumTreeRelations(s.maxUp, s.maxDown) }

// Next fills ids and targets [B, L] and rel [B, L, L] (row-major, the
// layout of posenc.NewPairwise(B, L, L, NumRelations(), rel)) with a batch:
// window i is Window(file, off, L, ...) at a drawn (file, off). It returns
// an error if a slice has the wrong length.
func (s *Sampler) Next(ids, targets, rel []int) error {
	b, l := s.b, s.l
	if len(ids) != b*l || len(targets) != b*l || len(rel) != b*l*l {
		return errors.Errorf("gocode: sampler: ids %d, targets %d and rel %d elements, want B*L = %d, %d and B*L*L = %d",
			len(ids), len(targets), len(rel), b*l, b*l, b*l*l)
	}
	total := s.cum[len(s.cum)-1]
	for i := 0; i < b; i++ {
		r := s.rng.Int64N(total)
		fi := sort.Search(len(s.cum), func(k int) bool { return s.cum[k] > r })
		off := r
		if fi > 0 {
			off -= s.cum[fi-1]
		}
		if err := Window(s.files[fi], int(off), l, s.maxUp, s.maxDown,
			ids[i*l:(i+1)*l], targets[i*l:(i+1)*l], rel[i*l*l:(i+1)*l*l]); err != nil {
			return err
		}
	}
	return nil
}

// State returns the sampler's state: the generator's state with the
// batch shape and the corpus hash, which SetState checks.
func (s *Sampler) State() ([]byte, error) {
	g, err := s.pcg.MarshalBinary()
	if err != nil {
		return nil, errors.Wrap(err, "gocode: sampler state")
	}
	var buf bytes.Buffer
	buf.WriteString(samplerMagic)
	binary.Write(&buf, binary.LittleEndian, [4]int64{int64(s.b), int64(s.l), int64(s.maxUp), int64(s.maxDown)})
	buf.WriteString(s.hash)
	buf.Write(g)
	return buf.Bytes(), nil
}

// SetState restores a state returned by State. It returns an error (and
// leaves the sampler unchanged) if the state is truncated or corrupt, or
// was saved by a sampler of another batch shape, other relation bounds or
// another corpus.
func (s *Sampler) SetState(st []byte) error {
	hashLen := len(s.hash)
	head := len(samplerMagic) + 32
	if len(st) < head+hashLen || string(st[:len(samplerMagic)]) != samplerMagic {
		return errors.Errorf("gocode: sampler state of %d bytes is not a gocode sampler state (corrupt or truncated)", len(st))
	}
	var shape [4]int64
	if err := binary.Read(bytes.NewReader(st[len(samplerMagic):head]), binary.LittleEndian, &shape); err != nil {
		return errors.Wrap(err, "gocode: sampler state: corrupt header")
	}
	if shape != [4]int64{int64(s.b), int64(s.l), int64(s.maxUp), int64(s.maxDown)} {
		return errors.Errorf("gocode: sampler state is for batch %d, length %d, bounds up %d down %d; this sampler has %d, %d, %d, %d",
			shape[0], shape[1], shape[2], shape[3], s.b, s.l, s.maxUp, s.maxDown)
	}
	if h := string(st[head : head+hashLen]); h != s.hash {
		return errors.Errorf("gocode: sampler state is for corpus %.12s, this sampler's corpus is %.12s", h, s.hash)
	}
	g := rand.NewPCG(0, 0)
	if err := g.UnmarshalBinary(st[head+hashLen:]); err != nil {
		return errors.Wrap(err, "gocode: sampler state: corrupt generator state")
	}
	*s.pcg = *g
	return nil
}
