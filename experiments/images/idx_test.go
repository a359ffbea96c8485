package images

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"slices"
	"testing"
)

func TestReadIDXValid(t *testing.T) {
	img, lab := synthIDX(3, 4, 5, 10, 1)
	for _, tc := range []struct {
		name string
		x    *IDX
		gz   bool
	}{
		{"labels", lab, false},
		{"images", img, false},
		{"labels gz", lab, true},
		{"images gz", img, true},
		{"empty dim", &IDX{Dims: []int{0, 28, 28}, Data: []byte{}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := idxBytes(t, tc.x)
			if tc.gz {
				b = gzipBytes(t, b)
			}
			got, err := ReadIDX(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Dims, tc.x.Dims) || !bytes.Equal(got.Data, tc.x.Data) {
				t.Fatalf("got dims %v, %d bytes; want %v, %d bytes", got.Dims, len(got.Data), tc.x.Dims, len(tc.x.Data))
			}
		})
	}
	if m := img.Magic(); m != MagicImages {
		t.Errorf("images magic 0x%08x, want 0x%08x", m, MagicImages)
	}
	if m := lab.Magic(); m != MagicLabels {
		t.Errorf("labels magic 0x%08x, want 0x%08x", m, MagicLabels)
	}
}

// header returns an IDX header with the given magic and dims.
func header(magic uint32, dims ...uint32) []byte {
	b := binary.BigEndian.AppendUint32(nil, magic)
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, d)
	}
	return b
}

func TestReadIDXErrors(t *testing.T) {
	valid := idxBytes(t, &IDX{Dims: []int{2, 2}, Data: []byte{1, 2, 3, 4}})
	for _, tc := range []struct {
		name string
		in   []byte
		want []string
	}{
		{"empty", nil, []string{"empty input"}},
		{"short magic", []byte{0, 0, 8}, []string{"truncated header", "3 of 4"}},
		{"bad magic", []byte{0x12, 0x34, 8, 1, 0, 0, 0, 0}, []string{"bad magic 0x12340801"}},
		{"dtype float", header(0x00000d03, 1, 1, 1), []string{"dtype code 0x0d", "only 0x08"}},
		{"no dims", header(0x00000800), []string{"0 dimensions"}},
		{"too many dims", header(0x00000809), []string{"9 dimensions"}},
		{"short dims", header(0x00000803, 60000, 28), []string{"truncated header", "8 of 12"}},
		{"truncated data", append(header(0x00000803, 2, 3, 3), make([]byte, 10)...), []string{"truncated data", "[2 3 3] need 18 bytes, got 10"}},
		{"too big", header(0x00000803, 1<<16, 1<<16, 1), []string{"need more than the limit", "[65536 65536 ...]"}},
		{"overflow", header(0x00000804, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff), []string{"need more than the limit", "[4294967295 ...]"}},
		{"trailing", append(append([]byte{}, valid...), 9, 9, 9), []string{"trailing data: 3 bytes after the 4 data bytes"}},
		{"gzip trailing", gzipBytes(t, append(append([]byte{}, valid...), 7)), []string{"gzip-compressed", "trailing data: 1 bytes"}},
		{"gzip garbage after stream", append(gzipBytes(t, valid), 'x', 'y'), []string{"gzip"}},
		{"gzip truncated", gzipBytes(t, valid)[:20], []string{"gzip-compressed"}},
		{"gzip bad header", []byte{0x1f, 0x8b, 0, 0}, []string{"gzip header"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := ReadIDX(bytes.NewReader(tc.in))
			if x != nil {
				t.Errorf("got a result %v with the error", x.Dims)
			}
			wantErr(t, err, tc.want...)
		})
	}
}

func TestLoadIDXNamesFile(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "bad.idx", []byte{1, 2, 3, 4, 5})
	_, err := LoadIDX(p)
	wantErr(t, err, p, "bad magic")
	_, err = LoadIDX(filepath.Join(dir, "missing"))
	wantErr(t, err, filepath.Join(dir, "missing"), "no such file")
	_, err = LoadIDX(dir)
	wantErr(t, err, dir, "directory")
	good := &IDX{Dims: []int{3}, Data: []byte{1, 2, 3}}
	p = writeFile(t, dir, "good.gz", gzipBytes(t, idxBytes(t, good)))
	x, err := LoadIDX(p)
	if err != nil || !bytes.Equal(x.Data, good.Data) {
		t.Fatalf("LoadIDX(%s) = %v, %v", p, x, err)
	}
}

func TestWriteIDXErrors(t *testing.T) {
	for _, tc := range []struct {
		x    *IDX
		want string
	}{
		{&IDX{}, "0 dimensions"},
		{&IDX{Dims: []int{-1}}, "outside [0, 2^32)"},
		{&IDX{Dims: []int{2}, Data: []byte{1}}, "need 2 data bytes, have 1"},
	} {
		wantErr(t, WriteIDX(&bytes.Buffer{}, tc.x), tc.want)
	}
}

// FuzzReadIDX checks that ReadIDX never panics and that whatever it
// accepts is consistent and survives a WriteIDX/ReadIDX round trip.
func FuzzReadIDX(f *testing.F) {
	img, lab := synthIDX(2, 3, 4, 10, 7)
	f.Add(idxBytes(f, img))
	f.Add(idxBytes(f, lab))
	f.Add(gzipBytes(f, idxBytes(f, img)))
	f.Add(idxBytes(f, img)[:20])
	f.Add(append(idxBytes(f, lab), 0))
	f.Add([]byte{})
	f.Add(header(0x00000803, 0xffffffff, 0xffffffff, 2))
	f.Add(header(0x00000d01, 1))
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		x, err := ReadIDX(bytes.NewReader(data))
		if err != nil {
			if x != nil {
				t.Fatal("result with an error")
			}
			return
		}
		n := 1
		for _, d := range x.Dims {
			n *= d
		}
		if len(x.Data) != n || n > MaxIDXBytes {
			t.Fatalf("dims %v but %d data bytes", x.Dims, len(x.Data))
		}
		b := idxBytes(t, x)
		if len(data) > 1 && data[0] != 0x1f && !bytes.Equal(b, data) {
			t.Fatalf("round trip of an uncompressed file changed it")
		}
		y, err := ReadIDX(bytes.NewReader(b))
		if err != nil || !slices.Equal(x.Dims, y.Dims) || !bytes.Equal(x.Data, y.Data) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
