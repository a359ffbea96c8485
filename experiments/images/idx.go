package images

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/pkg/errors"
)

// IDX dtype and magic numbers. An IDX file starts with the 4-byte magic
// 0x00 0x00 <dtype> <ndims>; only dtype 0x08 (unsigned byte) is supported.
const (
	DtypeUint8  = 0x08
	MagicLabels = 0x00000801 // unsigned bytes, 1 dimension: [N]
	MagicImages = 0x00000803 // unsigned bytes, 3 dimensions: [N, Rows, Cols]
)

// MaxIDXBytes is the largest data section ReadIDX accepts (1<<31 bytes,
// 2 GiB): larger dimensions are refused before anything is allocated.
const MaxIDXBytes = 1 << 31

// maxIDXDims is the largest number of dimensions ReadIDX accepts.
const maxIDXDims = 8

// IDX is a parsed IDX file of unsigned bytes: Data holds prod(Dims) bytes,
// row-major (the last dimension varies fastest).
type IDX struct {
	Dims []int
	Data []byte
}

// Magic returns the file's magic number 0x0000_08_<len(Dims)>.
func (x *IDX) Magic() uint32 { return DtypeUint8<<8 | uint32(len(x.Dims)) }

// LoadIDX reads the IDX file at path (gzip-compressed or not, told apart by
// the gzip magic 0x1f 0x8b). Errors name the path and the problem.
func LoadIDX(path string) (*IDX, error) {
	x, _, err := loadIDX(path, nil)
	return x, err
}

// loadIDX is LoadIDX, also returning the number of bytes read; when h is
// not nil, every byte of the file (as stored, compressed or not) is also
// written to h.
func loadIDX(path string, h io.Writer) (*IDX, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, 0, errors.Errorf("idx %s: no such file", path)
		}
		return nil, 0, errors.Wrapf(err, "idx %s", path)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, 0, errors.Errorf("idx %s is a directory, not an IDX file", path)
	}
	cr := &countReader{r: f}
	var r io.Reader = cr
	if h != nil {
		r = io.TeeReader(cr, h)
	}
	x, err := ReadIDX(r)
	if err != nil {
		return nil, 0, errors.Wrapf(err, "idx %s", path)
	}
	// ReadIDX read the file to its end (it refuses trailing bytes), so h
	// has had every byte of it and cr.n is its size.
	return x, cr.n, nil
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// ReadIDX parses one IDX stream of unsigned bytes from r, gzip-compressed or
// not. It reads r to its end and returns an error (never panics) for: an
// empty or short header, a magic whose first two bytes are not zero, a dtype
// other than 0x08, zero or more than 8 dimensions, dimensions whose product
// exceeds MaxIDXBytes, data shorter than the dimensions need (truncated),
// bytes after the data (trailing garbage), and gzip errors (corrupt stream,
// bad checksum).
func ReadIDX(r io.Reader) (*IDX, error) {
	br := bufio.NewReader(r)
	var in io.Reader = br
	gz := false
	if head, _ := br.Peek(2); len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		z, err := gzip.NewReader(br)
		if err != nil {
			return nil, errors.Wrap(err, "gzip header")
		}
		defer z.Close()
		in, gz = z, true
	}
	x, err := readIDX(in)
	if err != nil && gz {
		return nil, errors.Wrap(err, "gzip-compressed")
	}
	return x, err
}

func readIDX(r io.Reader) (*IDX, error) {
	var magic [4]byte
	if n, err := io.ReadFull(r, magic[:]); err != nil {
		if n == 0 && err == io.EOF {
			return nil, errors.New("empty input, no IDX header")
		}
		return nil, errors.Errorf("truncated header: %d of 4 magic bytes (%v)", n, err)
	}
	if magic[0] != 0 || magic[1] != 0 {
		return nil, errors.Errorf("bad magic 0x%08x: an IDX file starts with two zero bytes (0x00000801 labels, 0x00000803 images)",
			binary.BigEndian.Uint32(magic[:]))
	}
	if magic[2] != DtypeUint8 {
		return nil, errors.Errorf("magic 0x%08x: dtype code 0x%02x is not supported (only 0x08, unsigned byte)",
			binary.BigEndian.Uint32(magic[:]), magic[2])
	}
	nd := int(magic[3])
	if nd == 0 || nd > maxIDXDims {
		return nil, errors.Errorf("magic 0x%08x: %d dimensions, want 1 to %d", binary.BigEndian.Uint32(magic[:]), nd, maxIDXDims)
	}
	dimBytes := make([]byte, 4*nd)
	if n, err := io.ReadFull(r, dimBytes); err != nil {
		return nil, errors.Errorf("truncated header: %d of %d dimension bytes (%v)", n, 4*nd, err)
	}
	dims := make([]int, nd)
	need := uint64(1)
	for i := range dims {
		d := binary.BigEndian.Uint32(dimBytes[4*i:])
		dims[i] = int(d)
		// need <= MaxIDXBytes and d < 1<<32, so the product fits in 63 bits.
		need *= uint64(d)
		if need > MaxIDXBytes {
			return nil, errors.Errorf("dimensions %v need more than the limit of %d data bytes", dimsUpTo(dimBytes, i), uint64(MaxIDXBytes))
		}
	}
	var buf bytes.Buffer
	buf.Grow(int(min(need, 1<<20))) // grow past 1 MiB only as data arrives
	got, err := buf.ReadFrom(io.LimitReader(r, int64(need)))
	if err != nil {
		return nil, errors.Wrapf(err, "reading data after %d of %d bytes", got, need)
	}
	if uint64(got) < need {
		return nil, errors.Errorf("truncated data: dimensions %v need %d bytes, got %d", dims, need, got)
	}
	var extra [1]byte
	n, err := io.ReadFull(r, extra[:])
	if n > 0 {
		rest, _ := io.Copy(io.Discard, io.LimitReader(r, 1<<20))
		more := ""
		if rest == 1<<20 {
			more = " or more"
		}
		return nil, errors.Errorf("trailing data: %d%s bytes after the %d data bytes of dimensions %v", 1+rest, more, need, dims)
	}
	if err != io.EOF && err != nil {
		return nil, errors.Wrapf(err, "after the %d data bytes", need)
	}
	return &IDX{Dims: dims, Data: buf.Bytes()}, nil
}

// dimsUpTo formats the first i+1 dimensions for an error message.
func dimsUpTo(b []byte, i int) string {
	s := "["
	for j := 0; j <= i; j++ {
		if j > 0 {
			s += " "
		}
		s += fmt.Sprint(binary.BigEndian.Uint32(b[4*j:]))
	}
	if 4*(i+1) < len(b) {
		s += " ..."
	}
	return s + "]"
}

// WriteIDX writes x uncompressed in IDX format. It returns an error if x
// has no or more than 8 dimensions, a dimension outside [0, 2^32), or
// len(Data) != prod(Dims).
func WriteIDX(w io.Writer, x *IDX) error {
	if len(x.Dims) == 0 || len(x.Dims) > maxIDXDims {
		return errors.Errorf("idx: %d dimensions, want 1 to %d", len(x.Dims), maxIDXDims)
	}
	hdr := make([]byte, 4+4*len(x.Dims))
	binary.BigEndian.PutUint32(hdr, x.Magic())
	n := uint64(1)
	for i, d := range x.Dims {
		if d < 0 || uint64(d) > 1<<32-1 {
			return errors.Errorf("idx: dimension %d is %d, outside [0, 2^32)", i, d)
		}
		binary.BigEndian.PutUint32(hdr[4+4*i:], uint32(d))
		if n *= uint64(d); n > MaxIDXBytes {
			return errors.Errorf("idx: dimensions %v exceed the limit of %d bytes", x.Dims, uint64(MaxIDXBytes))
		}
	}
	if uint64(len(x.Data)) != n {
		return errors.Errorf("idx: dimensions %v need %d data bytes, have %d", x.Dims, n, len(x.Data))
	}
	if _, err := w.Write(hdr); err != nil {
		return errors.Wrap(err, "idx: writing header")
	}
	if _, err := w.Write(x.Data); err != nil {
		return errors.Wrap(err, "idx: writing data")
	}
	return nil
}
