package trainer

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzLoadCheckpoint: decoding never panics, and every accepted file
// re-encodes to a file that decodes to the same checkpoint.
func FuzzLoadCheckpoint(f *testing.F) {
	tr := newTiny(f, tinyConfig())
	ck, err := tr.Checkpoint()
	if err != nil {
		f.Fatal(err)
	}
	var good bytes.Buffer
	if err := ck.Encode(&good); err != nil {
		f.Fatal(err)
	}
	f.Add(good.Bytes())
	f.Add(good.Bytes()[:100])
	f.Add([]byte{})
	f.Add([]byte("\x10\x00\x00\x00\x00\x00\x00\x00{\"__metadata__\":{}}"))
	f.Add([]byte("\xff\xff\xff\xff\xff\xff\xff\x7f{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ck, err := DecodeCheckpoint(b)
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := ck.Encode(&buf); err != nil {
			return // e.g. non-finite weights, which Encode refuses
		}
		again, err := DecodeCheckpoint(buf.Bytes())
		if err != nil {
			t.Fatalf("re-encoded checkpoint does not decode: %v", err)
		}
		again.Format, ck.Format, again.Provenance = "", "", ck.Provenance
		if !reflect.DeepEqual(again, ck) {
			t.Fatalf("round trip changed the checkpoint")
		}
	})
}

// FuzzConfigJSON: decoding never panics; an accepted configuration
// re-encodes to JSON that decodes to the same configuration.
func FuzzConfigJSON(f *testing.F) {
	var buf bytes.Buffer
	DumpJSON(&buf, DefaultConfig())
	f.Add(buf.Bytes())
	f.Add([]byte(`{"LR": 1e-3, "Model": {"Pos": "rope"}}`))
	f.Add([]byte(`{"Dtype": "float16"}`))
	f.Add([]byte(`{"Batch": 1e99}`))
	f.Add([]byte(`{} {}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeConfig(b, DefaultConfig())
		if err != nil {
			return
		}
		c.Validate() // must not panic either
		var out bytes.Buffer
		if err := DumpJSON(&out, c); err != nil {
			t.Fatalf("accepted config does not encode: %v", err)
		}
		again, err := DecodeConfig(out.Bytes(), Config{})
		if err != nil {
			t.Fatalf("re-encoded config does not decode: %v\n%s", err, out.Bytes())
		}
		if !reflect.DeepEqual(again, c.Resolved()) {
			t.Fatalf("round trip: %+v, want %+v", again, c.Resolved())
		}
	})
}

// FuzzBatcherState: SetState never panics on garbage, and a state round
// trip reproduces the same batches.
func FuzzBatcherState(f *testing.F) {
	data := tinyText()
	b0, _ := NewBatcher(data, 2, 8, 1)
	st, _ := b0.State()
	f.Add(st, uint64(1))
	f.Add([]byte{}, uint64(2))
	f.Add([]byte("pcg:"), uint64(3))
	f.Add(append([]byte(nil), st[:len(st)-1]...), uint64(4))
	f.Fuzz(func(t *testing.T, s []byte, seed uint64) {
		b, err := NewBatcher(data, 2, 8, seed)
		if err != nil {
			t.Fatal(err)
		}
		b.SetState(s) // may fail; must not panic
		for i := 0; i < 2; i++ {
			next2(b, 2, 8)
		}
		saved, err := b.State()
		if err != nil {
			t.Fatal(err)
		}
		c, _ := NewBatcher(data, 2, 8, seed+1)
		if err := c.SetState(saved); err != nil {
			t.Fatalf("SetState of a State: %v", err)
		}
		for i := 0; i < 3; i++ {
			x1, y1 := next2(b, 2, 8)
			x2, y2 := next2(c, 2, 8)
			if !reflect.DeepEqual(x1, x2) || !reflect.DeepEqual(y1, y2) {
				t.Fatalf("batch %d differs after a state round trip", i)
			}
		}
	})
}
