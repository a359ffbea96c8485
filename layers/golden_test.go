package layers

// Parity with the PyTorch reference implementation: testdata/golden holds,
// for each case, weights, inputs, logits, loss and every gradient computed by
// testdata/golden/gen_golden.py (float64). The Go model must match them to
// 1e-5.

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/nlpodyssey/safetensors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

const goldenDir = "../testdata/golden"

// goldenFile is one decoded golden case.
type goldenFile struct {
	meta   map[string]string
	floats map[string][]float64
	ints   map[string][]int
	shapes map[string][]int
}

func readGolden(t *testing.T, path string) goldenFile {
	t.Helper()
	buf, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := safetensors.Deserialize(buf)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	_, md, err := safetensors.ReadMetadata(buf)
	if err != nil {
		t.Fatal(err)
	}
	gf := goldenFile{meta: md.Metadata(), floats: map[string][]float64{}, ints: map[string][]int{}, shapes: map[string][]int{}}
	for _, nt := range st.Tensors() {
		tv := nt.TensorView
		var shape []int
		for _, d := range tv.Shape() {
			shape = append(shape, int(d))
		}
		gf.shapes[nt.Name] = shape
		raw := tv.Data()
		switch tv.DType() {
		case safetensors.F64:
			f := make([]float64, len(raw)/8)
			for i := range f {
				f[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
			}
			gf.floats[nt.Name] = f
		case safetensors.I64:
			v := make([]int, len(raw)/8)
			for i := range v {
				v[i] = int(int64(binary.LittleEndian.Uint64(raw[8*i:])))
			}
			gf.ints[nt.Name] = v
		default:
			t.Fatalf("%s: tensor %s has dtype %v", path, nt.Name, tv.DType())
		}
	}
	return gf
}

func (gf goldenFile) int(t *testing.T, key string, def int) int {
	v, ok := gf.meta[key]
	if !ok || v == "" || v == "None" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("metadata %s=%q: %v", key, v, err)
	}
	return n
}

func (gf goldenFile) float(t *testing.T, key string, def float64) float64 {
	v, ok := gf.meta[key]
	if !ok || v == "" || v == "None" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatalf("metadata %s=%q: %v", key, v, err)
	}
	return f
}

func (gf goldenFile) bool(key string) bool {
	v := strings.ToLower(gf.meta[key])
	return v == "true" || v == "1" || v == "yes"
}

// config maps the case's metadata to the Go configuration.
func (gf goldenFile) config(t *testing.T) Config {
	o := posenc.Options{
		MaxLen:             gf.int(t, "max_len", 0),
		Alpha:              gf.meta["alpha"] != "" && gf.meta["alpha"] != "false",
		ShawK:              gf.int(t, "K", 0),
		T5Buckets:          gf.int(t, "num_buckets", 0),
		T5MaxDistance:      gf.int(t, "max_distance", 0),
		DebertaBuckets:     gf.int(t, "bucket_size", 0),
		DebertaMaxPosition: gf.int(t, "max_position", 0),
		RopeBase:           gf.float(t, "base", 0),
		RopePairing:        gf.meta["pairing"],
		RopeFraction:       gf.float(t, "rotary_fraction", 0),
		XLUntieR:           gf.bool("untie_r"),
	}
	pos := gf.meta["pos"]
	if pos == "sinusoidal" {
		o.SinusoidalScale = 1 // the reference adds the paper's unscaled table
	}
	if strings.HasSuffix(pos, "-alpha") { // the t5 case with a learnable scale
		pos = strings.TrimSuffix(pos, "-alpha")
	}
	return Config{
		Vocab: gf.int(t, "vocab", 256), DModel: gf.int(t, "d", 0), Heads: gf.int(t, "heads", 0),
		Layers: gf.int(t, "layers", 0), FFN: gf.int(t, "ff", 0), Eps: 1e-5, InitStd: 0.02,
		Causal: gf.bool("causal"), Pos: pos, PosOpts: o,
	}
}

func goldenCases(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	cases := files[:0]
	for _, f := range files {
		// A whole-LM case records the model's vocabulary in its metadata;
		// the other files (tables.safetensors, the hook-level cases of the
		// 2-D, graph and tree encodings) are read by posenc's tests.
		if isLMCase(t, f) {
			cases = append(cases, f)
		}
	}
	files = cases
	if len(files) == 0 {
		t.Fatalf("no golden files in %s (run /usr/bin/python3 testdata/golden/gen_golden.py)", goldenDir)
	}
	return files
}

// isLMCase reports whether the golden file at path is a whole-LM case of
// gen_golden.py's CASES: its metadata has "vocab".
func isLMCase(t *testing.T, path string) bool {
	t.Helper()
	buf, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, md, err := safetensors.ReadMetadata(buf)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	_, ok := md.Metadata()["vocab"]
	return ok
}

// close reports whether got matches want to 1e-5 (absolute, or relative for
// large values).
func closeTo(got, want float64) bool {
	return math.Abs(got-want) <= 1e-5*math.Max(1, math.Abs(want))
}

func TestGoldenParity(t *testing.T) {
	for _, path := range goldenCases(t) {
		path := path
		t.Run(strings.TrimSuffix(filepath.Base(path), ".safetensors"), func(t *testing.T) {
			gf := readGolden(t, path)
			cfg := gf.config(t)
			ids, targets := gf.ints["ids"], gf.ints["targets"]
			ishape := gf.shapes["ids"]
			if len(ishape) != 2 || ids == nil || targets == nil {
				t.Fatalf("golden file lacks ids/targets: shapes %v", gf.shapes)
			}
			b, tt := ishape[0], ishape[1]
			g := G.NewGraph()
			p := graph.NewParams(tensor.Float64, 1)
			lm, err := NewLM(g, p, cfg)
			if err != nil {
				t.Fatal(err)
			}
			idn := G.NewTensor(g, tensor.Int, 2, G.WithShape(b, tt), G.WithName("ids"), G.WithValue(tensor.New(tensor.WithShape(b, tt), tensor.WithBacking(ids))))
			logits, err := lm.FwdAt(idn, gf.int(t, "q_start", 0))
			if err != nil {
				t.Fatal(err)
			}
			tgn := G.NewTensor(g, tensor.Int, 1, G.WithShape(b*tt), G.WithName("targets"), G.WithValue(tensor.New(tensor.WithShape(b*tt), tensor.WithBacking(targets))))
			loss, err := graph.CrossEntropy(logits, tgn)
			if err != nil {
				t.Fatal(err)
			}
			// every Go parameter must come from the file, and every file
			// parameter must exist in Go
			learn := lm.Learnables()
			for _, n := range learn {
				w, ok := gf.floats[n.Name()]
				if !ok {
					t.Fatalf("Go parameter %s not in the golden file", n.Name())
				}
				if err := p.Set(n.Name(), w); err != nil {
					t.Fatal(err)
				}
			}
			for name := range gf.floats {
				if strings.HasPrefix(name, "grad/") {
					if p.Value(strings.TrimPrefix(name, "grad/")) == nil {
						t.Fatalf("golden parameter %s has no Go counterpart", strings.TrimPrefix(name, "grad/"))
					}
				}
			}
			if _, err := G.Grad(loss, learn...); err != nil {
				t.Fatal(err)
			}
			m := G.NewTapeMachine(g, G.BindDualValues(learn...))
			defer m.Close()
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			compare := func(what string, got, want []float64) {
				t.Helper()
				if len(got) != len(want) {
					t.Fatalf("%s: %d values, golden %d", what, len(got), len(want))
				}
				for i := range got {
					if !closeTo(got[i], want[i]) {
						t.Fatalf("%s[%d]: Go %.10g, PyTorch %.10g", what, i, got[i], want[i])
					}
				}
			}
			compare("logits", graph.ToFloat64s(logits.Value()), gf.floats["logits"])
			compare("loss", graph.ToFloat64s(loss.Value()), gf.floats["loss"])
			for _, n := range learn {
				gv, err := n.Grad()
				if err != nil {
					t.Fatal(err)
				}
				compare("grad/"+n.Name(), graph.ToFloat64s(gv), gf.floats["grad/"+n.Name()])
			}
		})
	}
}
