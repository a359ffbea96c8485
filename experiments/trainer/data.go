package trainer

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/pkg/errors"
)

// Vocab is the byte-level vocabulary size: every token is one byte.
const Vocab = 256

// batchStream is the second PCG seed word of the batch generator, so that the
// batch stream differs from other streams seeded with the same run seed.
const batchStream = 0x6261746368 // "batch"

// DefaultCorpusPath returns $GOROOT/src/testdata/Isaac.Newton-Opticks.txt,
// the text of Newton's Opticks shipped with every Go installation. GOROOT is
// asked from `go env GOROOT`, falling back to runtime.GOROOT().
func DefaultCorpusPath() string {
	root := ""
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		root = strings.TrimSpace(string(out))
	}
	if root == "" {
		root = runtime.GOROOT() //nolint:staticcheck // documented fallback
	}
	return filepath.Join(root, "src", "testdata", "Isaac.Newton-Opticks.txt")
}

// Corpus is a byte-level text corpus split into a training part (the first
// 90% of its bytes) and a validation part (the last 10%).
type Corpus struct {
	// Path is the file the corpus was read from ("" if built from memory).
	Path       string
	Train, Val []byte
}

// MaxCorpusBytes is the largest corpus LoadCorpus reads (1 GiB).
const MaxCorpusBytes = 1 << 30

// LoadCorpus reads the text file at path ("" means DefaultCorpusPath), at
// most MaxCorpusBytes, and splits it. It returns an error naming the path if
// the file cannot be read, is empty or is larger than the limit.
func LoadCorpus(path string) (*Corpus, error) { return LoadCorpusLimit(path, MaxCorpusBytes) }

// LoadCorpusLimit is LoadCorpus with a size limit of max bytes: a larger
// regular file is refused before reading, a pipe as soon as max+1 bytes
// were read; directories and devices (such as /dev/zero) are refused.
func LoadCorpusLimit(path string, max int64) (*Corpus, error) {
	if path == "" {
		path = DefaultCorpusPath()
	}
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, errors.Errorf("corpus %s: no such file (pass a text file with -corpus)", path)
		}
		return nil, errors.Wrapf(err, "corpus %s", path)
	}
	defer f.Close()
	tooBig := func() error {
		return errors.Errorf("corpus %s is larger than the limit of %d bytes (%s)", path, max, bytesString(float64(max)))
	}
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > max {
		return nil, tooBig()
	} else if err == nil && st.IsDir() {
		return nil, errors.Errorf("corpus %s is a directory, not a text file", path)
	} else if err == nil && st.Mode()&os.ModeDevice != 0 {
		return nil, errors.Errorf("corpus %s is a device, not a text file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, errors.Wrapf(err, "corpus %s", path)
	}
	if int64(len(data)) > max {
		return nil, tooBig()
	}
	c, err := NewCorpus(data)
	if err != nil {
		return nil, errors.Wrapf(err, "corpus %s", path)
	}
	c.Path = path
	return c, nil
}

// NewCorpus splits data: Train is data[:n*9/10], Val the rest. It returns an
// error if data has fewer than 2 bytes, the least that gives both parts a
// byte.
func NewCorpus(data []byte) (*Corpus, error) {
	if len(data) == 0 {
		return nil, errors.New("corpus is empty")
	}
	if len(data) < 2 {
		return nil, errors.Errorf("corpus has %d byte, too short to split into training and validation parts", len(data))
	}
	cut := len(data) * 9 / 10
	if cut == len(data) {
		cut--
	}
	if cut == 0 {
		cut = 1
	}
	return &Corpus{Train: data[:cut], Val: data[cut:]}, nil
}

// Hash returns the hex SHA-256 of the corpus bytes (Train then Val, that
// is the file's bytes): checkpoints record it, and resuming or evaluating
// on another corpus is refused.
func (c *Corpus) Hash() string {
	h := sha256.New()
	h.Write(c.Train)
	h.Write(c.Val)
	return hex.EncodeToString(h.Sum(nil))
}

func (c *Corpus) name() string {
	if c.Path == "" {
		return "(in memory)"
	}
	return c.Path
}

// CheckWindow returns an error unless both parts hold at least one window of
// seqLen inputs plus its next-byte target (seqLen+1 bytes).
func (c *Corpus) CheckWindow(seqLen int) error {
	name := c.Path
	if name == "" {
		name = "(in memory)"
	}
	if seqLen <= 0 {
		return errors.Errorf("corpus %s: sequence length %d must be positive", name, seqLen)
	}
	if len(c.Train) < seqLen+1 {
		return errors.Errorf("corpus %s: training part has %d bytes, too short for one window of %d+1 bytes (seq len %d)",
			name, len(c.Train), seqLen, seqLen)
	}
	if len(c.Val) < seqLen+1 {
		return errors.Errorf("corpus %s: validation part (last 10%%) has %d bytes, too short for one window of %d+1 bytes (seq len %d)",
			name, len(c.Val), seqLen, seqLen)
	}
	return nil
}

// Batcher draws training batches: B windows of T+1 consecutive bytes at
// offsets drawn uniformly from a seeded PCG generator. Windows may overlap.
// Its generator state can be saved and restored, so a resumed run sees the
// same batches as an uninterrupted one.
type Batcher struct {
	data []byte
	b, t int
	pcg  *rand.PCG
	rng  *rand.Rand
}

// NewBatcher returns a Batcher over data for batches of b windows of t
// inputs. It returns an error if b or t is not positive or data is shorter
// than t+1 bytes.
func NewBatcher(data []byte, b, t int, seed uint64) (*Batcher, error) {
	if b <= 0 || t <= 0 {
		return nil, errors.Errorf("batcher: batch %d and seq len %d must be positive", b, t)
	}
	if len(data) < t+1 {
		return nil, errors.Errorf("batcher: %d bytes of data, too short for one window of %d+1 bytes", len(data), t)
	}
	pcg := rand.NewPCG(seed, batchStream)
	return &Batcher{data: data, b: b, t: t, pcg: pcg, rng: rand.New(pcg)}, nil
}

// Next fills ids and targets, each of length B*T, row-major [B, T]: window
// i starts at a random offset o_i, ids[i*T+j] = data[o_i+j] and
// targets[i*T+j] = data[o_i+j+1]. It panics if a slice has the wrong length.
func (b *Batcher) Next(ids, targets []int) {
	n := b.b * b.t
	if len(ids) != n || len(targets) != n {
		panic("trainer: Batcher.Next: slices of wrong length")
	}
	span := len(b.data) - b.t // offsets 0..span-1 keep o+T < len(data)
	for i := 0; i < b.b; i++ {
		o := b.rng.IntN(span)
		w := b.data[o : o+b.t+1]
		for j := 0; j < b.t; j++ {
			ids[i*b.t+j] = int(w[j])
			targets[i*b.t+j] = int(w[j+1])
		}
	}
}

// State returns the generator state (see SetState).
func (b *Batcher) State() ([]byte, error) { return b.pcg.MarshalBinary() }

// SetState restores a state returned by State.
func (b *Batcher) SetState(s []byte) error {
	if err := b.pcg.UnmarshalBinary(s); err != nil {
		return errors.Wrap(err, "batcher: restoring generator state")
	}
	return nil
}
