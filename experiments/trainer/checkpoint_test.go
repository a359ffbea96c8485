package trainer

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"gorgonia.org/tensor"
)

func TestCheckpointRoundTrip(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		cfg := tinyConfig()
		cfg.Dtype = dt
		tr := newTiny(t, cfg)
		trainN(t, tr, 2)
		path := filepath.Join(t.TempDir(), "sub", "ck.safetensors")
		if err := tr.Save(path); err != nil {
			t.Fatal(err)
		}
		want, _ := tr.Checkpoint()
		got, err := LoadCheckpoint(path)
		if err != nil {
			t.Fatal(err)
		}
		if got.Step != 2 || !bytes.Equal(got.RNG, want.RNG) {
			t.Errorf("%v: step %d rng %x, want 2 %x", dt, got.Step, got.RNG, want.RNG)
		}
		if !reflect.DeepEqual(got.Config, cfg.Resolved()) || got.CorpusHash != tr.Corpus.Hash() || got.Provenance != Provenance() {
			t.Errorf("%v: config %+v, want %+v", dt, got.Config, cfg)
		}
		if !reflect.DeepEqual(got.Params, want.Params) {
			t.Errorf("%v: params differ", dt)
		}
		if len(got.Params) != len(tr.Params.Names()) {
			t.Errorf("%v: %d params, model has %d", dt, len(got.Params), len(tr.Params.Names()))
		}
		if !reflect.DeepEqual(got.Optim, want.Optim) || len(got.Optim) < 3*len(got.Params) {
			t.Errorf("%v: optimizer state differs (%d entries)", dt, len(got.Optim))
		}
		// The file stores parameters in the run's dtype.
		if dt == tensor.Float32 {
			st, _ := os.Stat(path)
			n := tr.Params.Count()
			if st.Size() > int64(4*n+8*3*n+64*1024) {
				t.Errorf("float32 checkpoint of %d bytes for %d params", st.Size(), n)
			}
		}
		// Restoring into a fresh trainer gives the same weights.
		tr2 := newTiny(t, cfg)
		if err := tr2.Load(path); err != nil {
			t.Fatal(err)
		}
		for _, n := range tr.Params.Names() {
			if !reflect.DeepEqual(tr.Params.Float64s(n), tr2.Params.Float64s(n)) {
				t.Fatalf("%v: param %s differs after Load", dt, n)
			}
		}
		if tr2.Step() != 2 {
			t.Errorf("step %d after Load", tr2.Step())
		}
		// LoadModel gives the same weights in a standalone store.
		p, mc, err := LoadModel(path)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(mc, cfg.Resolved()) || p.Dtype() != dt {
			t.Errorf("LoadModel config %+v dtype %v", mc, p.Dtype())
		}
		for _, n := range tr.Params.Names() {
			if !reflect.DeepEqual(tr.Params.Float64s(n), p.Float64s(n)) {
				t.Fatalf("%v: LoadModel param %s differs", dt, n)
			}
		}
	}
}

func TestCheckpointCorrupt(t *testing.T) {
	tr := newTiny(t, tinyConfig())
	trainN(t, tr, 1)
	dir := t.TempDir()
	path := filepath.Join(dir, "ck.safetensors")
	if err := tr.Save(path); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(path)
	cases := map[string][]byte{
		"truncated half":   good[:len(good)/2],
		"truncated 1 byte": good[:len(good)-1],
		"header only":      good[:4],
		"empty":            {},
		"garbage":          bytes.Repeat([]byte{0xff}, 100),
		"bad header json":  append(append(append([]byte(nil), good[:8]...), '#'), good[9:]...),
		"bit flip in data": func() []byte { b := append([]byte(nil), good...); b[len(b)-3] ^= 0x10; return b }(),
		"extra bytes":      append(append([]byte(nil), good...), 0),
	}
	for name, data := range cases {
		p := filepath.Join(dir, "bad.safetensors")
		os.WriteFile(p, data, 0o644)
		_, err := LoadCheckpoint(p)
		wantErr(t, err, "bad.safetensors", "corrupt or truncated")
		if err := tr.Load(p); err == nil {
			t.Errorf("%s: Load accepted a corrupt file", name)
		}
	}
	_, err := LoadCheckpoint(filepath.Join(dir, "missing.safetensors"))
	wantErr(t, err, "missing.safetensors", "no such file")
}

func TestCheckpointMismatch(t *testing.T) {
	cfg := tinyConfig()
	tr := newTiny(t, cfg)
	dir := t.TempDir()
	path := filepath.Join(dir, "ck.safetensors")
	if err := tr.Save(path); err != nil {
		t.Fatal(err)
	}

	other := cfg
	other.Model.DModel, other.Model.FFN = 32, 64
	err := newTiny(t, other).Load(path)
	// The resolved sinusoidal scale, 1/sqrt(d-model), follows d-model.
	wantErr(t, err, "ck.safetensors", "checkpoint was trained with d-model=16, ffn=32, sinusoidal-scale=0.25; this run asks for d-model=32, ffn=64, sinusoidal-scale=0.1767")

	other = cfg
	other.Model.Pos = "sinusoidal"
	other.SeqLen = 4
	err = newTiny(t, other).Load(path)
	wantErr(t, err, "trained with pos=none, seq-len=8; this run asks for pos=sinusoidal, seq-len=4")

	other = cfg
	other.Dtype = tensor.Float32
	wantErr(t, newTiny(t, other).Load(path), "dtype=float64", "dtype=float32")

	// Settings outside the model may differ (e.g. more steps).
	other = cfg
	other.Steps, other.LR = 100, 1e-3
	if err := newTiny(t, other).Load(path); err != nil {
		t.Errorf("more steps: %v", err)
	}

	// A missing tensor, an extra one, a wrong shape.
	ck, _ := tr.Checkpoint()
	w := ck.Params["head/w"]
	delete(ck.Params, "head/w")
	ck.Save(path)
	wantErr(t, newTiny(t, cfg).Load(path), "ck.safetensors", `missing parameter "head/w"`)

	ck.Params["head/w"] = w
	ck.Params["block9/x"] = Tensor{Shape: []int{2}, Data: []float64{1, 2}}
	ck.Save(path)
	wantErr(t, newTiny(t, cfg).Load(path), `[block9/x] are not in this model`)

	delete(ck.Params, "block9/x")
	ck.Params["head/w"] = Tensor{Shape: []int{w.Shape[1], w.Shape[0]}, Data: w.Data}
	ck.Save(path)
	wantErr(t, newTiny(t, cfg).Load(path), `parameter "head/w" has shape (256, 16) in the checkpoint, this model has (16, 256)`)

	// Missing optimizer state.
	ck.Params["head/w"] = w
	delete(ck.Optim, "exp_avg/head/w")
	ck.Optim["exp_avg/head/w"] = nil
	delete(ck.Optim, "lr")
	ck.Save(path)
	wantErr(t, newTiny(t, cfg).Load(path), "optimizer state")
}

// failAfter fails every write after n bytes.
type failAfter struct {
	w io.Writer
	n int
}

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		f.w.Write(p[:f.n])
		f.n = 0
		return 0, errors.New("disk full")
	}
	f.n -= len(p)
	return f.w.Write(p)
}

func TestCheckpointAtomic(t *testing.T) {
	tr := newTiny(t, tinyConfig())
	dir := t.TempDir()
	path := filepath.Join(dir, "ck.safetensors")
	if err := tr.Save(path); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	trainN(t, tr, 1)
	ck, _ := tr.Checkpoint()
	for _, n := range []int{0, 10, 5000} {
		err := ck.save(path, func(w io.Writer) io.Writer { return &failAfter{w: w, n: n} })
		wantErr(t, err, "disk full")
		after, _ := os.ReadFile(path)
		if !bytes.Equal(before, after) {
			t.Fatalf("fail after %d bytes: the checkpoint changed", n)
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 1 {
			t.Fatalf("fail after %d bytes: %d files left in the directory", n, len(ents))
		}
	}
	// A successful save replaces the file.
	if err := ck.Save(path); err != nil {
		t.Fatal(err)
	}
	if got, _ := LoadCheckpoint(path); got.Step != 1 {
		t.Fatalf("step %d after save", got.Step)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d files after save", len(ents))
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("checkpoint mode %v, want 0644", st.Mode().Perm())
	}
}

func TestConfigJSONAndMismatch(t *testing.T) {
	cfg := tinyConfig()
	if err := cfg.Mismatch(cfg); err != nil {
		t.Error(err)
	}
	o := cfg
	o.Model.Pos = ""
	if err := cfg.Mismatch(o); err != nil {
		t.Errorf(`pos "" vs "none": %v`, err)
	}
	// Resolved defaults are the same configuration.
	o = cfg
	o.Model.PosOpts.T5Buckets = 32
	if err := cfg.Mismatch(o); err != nil {
		t.Errorf("t5-buckets 0 vs its default 32: %v", err)
	}
	// Allowed changes are listed, not refused.
	o = cfg
	o.LR, o.Steps = 1e-3, 99
	if err := cfg.Mismatch(o); err != nil {
		t.Errorf("lr and steps: %v", err)
	}
	if ch := cfg.Changes(o); len(ch) != 2 || ch[0] != "steps 99 -> 6" || ch[1] != "lr 0.001 -> 0.002" {
		t.Errorf("changes %q", ch)
	}
	// A checkpoint trained without the streaming attention resumes with it.
	o = cfg
	o.Model.Stream = true
	if err := cfg.Mismatch(o); err != nil {
		t.Errorf("stream: %v", err)
	}
	if ch := cfg.Changes(o); len(ch) != 1 || ch[0] != "stream true -> false" {
		t.Errorf("changes %q", ch)
	}
	o = cfg
	o.Seed = 7
	wantErr(t, cfg.Mismatch(o), "seed=7")
	cfg.Model.PosOpts.MaxLen = 64
	o = cfg
	o.Model.PosOpts.MaxLen = 99
	wantErr(t, cfg.Mismatch(o), "trained with max-len=99; this run asks for max-len=64")
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	d := DefaultConfig()
	if d.Batch != 32 || d.SeqLen != 64 || d.Steps != 2000 || d.LR != 2e-3 || d.Beta2 != 0.99 || d.Warmup != 100 ||
		d.FloorFrac != 0.1 || d.ClipNorm != 1 || d.WeightDecay != 0.01 || d.Dtype != tensor.Float32 || d.Seed != 1 {
		t.Errorf("reference config changed: %+v", d)
	}
	empty := DefaultConfig()
	empty.Model.Pos = ""
	if err := empty.Validate(); err != nil {
		t.Errorf(`pos "": %v`, err)
	}
	bad := func(f func(*Config), subs ...string) {
		t.Helper()
		c := DefaultConfig()
		f(&c)
		wantErr(t, c.Validate(), subs...)
	}
	bad(func(c *Config) { c.Model.Pos = "nope" }, `unknown encoding "nope"`, "none", "sinusoidal")
	bad(func(c *Config) { c.Batch = 0 }, "batch is 0")
	bad(func(c *Config) { c.SeqLen = -1 }, "seq len")
	bad(func(c *Config) { c.LR = 0 }, "learning rate")
	bad(func(c *Config) { c.Beta2 = 1 }, "betas")
	bad(func(c *Config) { c.Model.Heads = 3 }, "heads")
	bad(func(c *Config) { c.Model.Vocab = 100 }, "vocab 100")
	bad(func(c *Config) { c.Dtype = tensor.Int }, "dtype")
	if _, err := ParseDtype("float16"); err == nil {
		t.Error("float16 accepted")
	}
}
