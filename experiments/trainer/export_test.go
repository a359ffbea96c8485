package trainer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nlpodyssey/safetensors"
)

// TestExportWeights: the file holds exactly the model's weights under their
// names and shapes, the resolved config, and no optimizer state; 0644.
func TestExportWeights(t *testing.T) {
	cfg := tinyConfig()
	tr := newTiny(t, cfg)
	trainN(t, tr, 1)
	path := filepath.Join(t.TempDir(), "w.safetensors")
	if err := ExportWeights(path, tr.Params, tr.Cfg); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	st, err := safetensors.Deserialize(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Names()) != len(tr.Params.Names()) {
		t.Errorf("%d tensors, model has %d", len(st.Names()), len(tr.Params.Names()))
	}
	for _, n := range tr.Params.Names() {
		v, ok := st.Tensor(n)
		if !ok {
			t.Fatalf("no tensor %q", n)
		}
		shape, data, err := decode(v)
		info, _ := tr.Params.Info(n)
		want := tr.Params.Float64s(n)
		if err != nil || len(shape) != len(info.Shape) || len(data) != len(want) || data[0] != want[0] || data[len(data)-1] != want[len(want)-1] {
			t.Errorf("%s: shape %v data %d values, err %v", n, shape, len(data), err)
		}
	}
	_, md, _ := safetensors.ReadMetadata(b)
	c, err := DecodeConfig([]byte(md.Metadata()["config"]), Config{})
	if err != nil || c != tr.Cfg {
		t.Errorf("config %+v %v", c, err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", st.Mode().Perm())
	}
	tr.Params.Value("head/w").Data().([]float64)[0] = posInf()
	wantErr(t, ExportWeights(path, tr.Params, tr.Cfg), "non-finite")
}
