package images

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"

	"github.com/pkg/errors"
)

// Norm is the per-pixel normalisation x' = (x - Mean) / Std applied to
// batches. The zero Norm in BatcherOptions means MNISTNorm.
type Norm struct {
	Mean, Std float32
}

// MNISTNorm is the mean and standard deviation of the MNIST training
// pixels (in [0, 1]): the usual 0.1307 and 0.3081. It is the default.
var MNISTNorm = Norm{Mean: 0.1307, Std: 0.3081}

// NoNorm leaves pixels as they are, in [0, 1].
var NoNorm = Norm{Mean: 0, Std: 1}

// Apply normalises x in place: x[i] = (x[i] - Mean) / Std in float32.
func (n Norm) Apply(x []float32) {
	for i, v := range x {
		x[i] = (v - n.Mean) / n.Std
	}
}

// resolve returns MNISTNorm for the zero Norm, and an error for a
// non-finite Mean or a Std that is not positive and finite.
func (n Norm) resolve() (Norm, error) {
	if n == (Norm{}) {
		return MNISTNorm, nil
	}
	if math.IsNaN(float64(n.Mean)) || math.IsInf(float64(n.Mean), 0) {
		return n, errors.Errorf("normalisation mean %v must be finite", n.Mean)
	}
	if !(n.Std > 0) || math.IsInf(float64(n.Std), 0) {
		return n, errors.Errorf("normalisation std %v must be positive and finite (Norm{} means MNISTNorm, NoNorm is mean 0 std 1)", n.Std)
	}
	return n, nil
}

// BatcherOptions configures a Batcher.
type BatcherOptions struct {
	Batch int    // images per batch, B
	Patch int    // patch size P: images become T = (Rows/P)*(Cols/P) patches of P*P pixels
	Seed  uint64 // seed of the PCG generator that shuffles each epoch
	// Norm normalises every pixel of a batch; the zero value means
	// MNISTNorm (mean 0.1307, std 0.3081), NoNorm keeps values in [0, 1].
	Norm Norm
}

// batcherStream is the second PCG seed word, so that the image batch stream
// differs from other streams seeded with the same run seed.
const batcherStream = 0x696d61676573 // "images"

// Batcher draws training batches of patch sequences from a Dataset in
// epochs: each epoch visits every image once in an order shuffled by a
// seeded PCG generator (math/rand/v2; Fisher-Yates from the identity with
// Uint64N, drawn when the epoch starts). A batch that crosses the end of an
// epoch continues with the next one. Its state (State, SetState) is the
// generator state at the start of the current epoch and the position in
// it, so a restored Batcher continues the exact sequence.
type Batcher struct {
	ds     *Dataset
	o      BatcherOptions
	gr, gc int
	pcg    *rand.PCG
	rng    *rand.Rand
	start  []byte // pcg state before the current epoch's shuffle
	perm   []int
	epoch  int // current epoch, 0-based
	pos    int // images of the current epoch already drawn
	idx    []int
}

// NewBatcher returns a Batcher over ds. It returns an error if the dataset
// is inconsistent (Dataset.Check), Batch is not positive, Patch does not
// divide Rows and Cols, or Norm is invalid.
func NewBatcher(ds *Dataset, o BatcherOptions) (*Batcher, error) {
	if err := ds.Check(); err != nil {
		return nil, errors.Wrap(err, "batcher")
	}
	if o.Batch <= 0 {
		return nil, errors.Errorf("batcher: batch size %d must be positive", o.Batch)
	}
	gr, gc, err := Grid(ds, o.Patch)
	if err != nil {
		return nil, errors.Wrap(err, "batcher")
	}
	if o.Norm, err = o.Norm.resolve(); err != nil {
		return nil, errors.Wrap(err, "batcher")
	}
	pcg := rand.NewPCG(o.Seed, batcherStream)
	b := &Batcher{ds: ds, o: o, gr: gr, gc: gc, pcg: pcg, rng: rand.New(pcg),
		perm: make([]int, ds.N), idx: make([]int, o.Batch)}
	b.startEpoch()
	b.epoch = 0
	return b, nil
}

// startEpoch records the generator state and shuffles a new order.
func (b *Batcher) startEpoch() {
	b.start, _ = b.pcg.MarshalBinary() // PCG's MarshalBinary never fails
	shuffle(b.rng, b.perm)
	b.epoch++
	b.pos = 0
}

// shuffle sets perm to a uniformly random permutation of 0..len-1.
func shuffle(rng *rand.Rand, perm []int) {
	for i := range perm {
		perm[i] = i
	}
	for i := len(perm) - 1; i > 0; i-- {
		j := int(rng.Uint64N(uint64(i + 1)))
		perm[i], perm[j] = perm[j], perm[i]
	}
}

// Shape returns the shape of a batch: B images of T = gridRows*gridCols
// patches of D = Patch*Patch pixels (x is [B, T, D]).
func (b *Batcher) Shape() (batch, tokens, patchDim int) {
	return b.o.Batch, b.gr * b.gc, b.o.Patch * b.o.Patch
}

// Grid returns the patch grid (gridRows, gridCols).
func (b *Batcher) Grid() (gridRows, gridCols int) { return b.gr, b.gc }

// Epoch returns the current epoch (0 for the first) and how many of its
// images were drawn.
func (b *Batcher) Epoch() (epoch, drawn int) { return b.epoch, b.pos }

// Options returns the options with the resolved Norm.
func (b *Batcher) Options() BatcherOptions { return b.o }

// Next fills x ([B, T, D] row-major, length B*Rows*Cols, as PatchBatch
// writes it, then normalised) and labels (length B) with the next batch.
// It returns an error, and draws nothing, if a slice has the wrong length.
func (b *Batcher) Next(x []float32, labels []int) error {
	B, T, D := b.Shape()
	if len(x) != B*T*D || len(labels) != B {
		return errors.Errorf("batcher: next: x has length %d and labels %d, want %d (%dx%dx%d) and %d", len(x), len(labels), B*T*D, B, T, D, B)
	}
	for k := range b.idx {
		if b.pos == len(b.perm) {
			b.startEpoch()
		}
		b.idx[k] = b.perm[b.pos]
		b.pos++
	}
	if _, _, err := PatchBatch(b.ds, b.idx, b.o.Patch, x); err != nil {
		return errors.Wrap(err, "batcher") // unreachable: shapes were checked
	}
	for k, i := range b.idx {
		labels[k] = b.ds.Labels[i]
	}
	b.o.Norm.Apply(x)
	return nil
}

// stateMagic starts every Batcher state (version 1).
const stateMagic = "rpeimgB1"

// State returns the batcher's position: the dataset size, epoch, position
// in the epoch and the generator state at the epoch's start (see SetState).
func (b *Batcher) State() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(stateMagic)
	for _, v := range []uint64{uint64(b.ds.N), uint64(b.epoch), uint64(b.pos), uint64(len(b.start))} {
		binary.Write(&buf, binary.LittleEndian, v)
	}
	buf.Write(b.start)
	return buf.Bytes(), nil
}

// SetState restores a state returned by State of a Batcher over a dataset
// of the same size, so that Next continues that batcher's sequence. It
// returns an error, and changes nothing, if the state is corrupt (wrong
// magic or length, position beyond the epoch, bad generator state) or was
// saved for a dataset of another size.
func (b *Batcher) SetState(s []byte) error {
	const hdr = len(stateMagic) + 4*8
	if len(s) < hdr || string(s[:len(stateMagic)]) != stateMagic {
		return errors.Errorf("batcher: corrupt state: %d bytes, not a batcher state (want the %q header of %d bytes)", len(s), stateMagic, hdr)
	}
	var v [4]uint64
	for i := range v {
		v[i] = binary.LittleEndian.Uint64(s[len(stateMagic)+8*i:])
	}
	n, epoch, pos, plen := v[0], v[1], v[2], v[3]
	if n != uint64(b.ds.N) {
		return errors.Errorf("batcher: state is for a dataset of %d images, this one has %d", n, b.ds.N)
	}
	if pos > n || epoch > math.MaxInt32 {
		return errors.Errorf("batcher: corrupt state: epoch %d position %d of %d images", epoch, pos, n)
	}
	if plen != uint64(len(s)-hdr) {
		return errors.Errorf("batcher: corrupt state: generator state of %d bytes, but %d follow the header", plen, len(s)-hdr)
	}
	pcg := new(rand.PCG)
	if err := pcg.UnmarshalBinary(s[hdr:]); err != nil {
		return errors.Wrap(err, "batcher: corrupt state: restoring generator state")
	}
	start := append([]byte(nil), s[hdr:]...)
	rng := rand.New(pcg)
	shuffle(rng, b.perm)
	b.pcg, b.rng, b.start, b.epoch, b.pos = pcg, rng, start, int(epoch), int(pos)
	return nil
}
