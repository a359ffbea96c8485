package trainer

import (
	"os"
	"path/filepath"
	"strings"
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
	if k := md.Metadata()["task"]; k != "lm" {
		t.Errorf("task %q, want lm", k)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", st.Mode().Perm())
	}
	tr.Params.Value("head/w").Data().([]float64)[0] = posInf()
	wantErr(t, ExportWeights(path, tr.Params, tr.Cfg), "non-finite")
}

// TestExportCheckpoint: a checkpoint of any kind exports with its kind and
// task configuration; LoadWeights reads the file back, LoadCheckpoint and
// LoadWeights name the other's files, FileFormat tells them apart from the
// header; a refused export leaves the previous file intact.
func TestExportCheckpoint(t *testing.T) {
	dir := t.TempDir()
	cfg := tinyConfig()
	cfg.Model.Vocab = 0
	ck := &Checkpoint{Config: cfg, Step: 2, Task: "vit", TaskConfig: []byte("{\"patch\":4}"), Params: map[string]Tensor{
		"patch_embed/w": {Shape: []int{2, 3}, Data: []float64{1, 2, 3, 4, 5, 6}},
		"head/w":        {Shape: []int{3}, Data: []float64{-1, 0, 1}},
	}}
	ckPath, w := filepath.Join(dir, "vit.ckpt"), filepath.Join(dir, "vit.weights")
	if err := ck.Save(ckPath); err != nil {
		t.Fatal(err)
	}
	if err := ExportCheckpoint(w, ck); err != nil {
		t.Fatal(err)
	}
	got, err := LoadWeights(w)
	if err != nil {
		t.Fatal(err)
	}
	if got.Task != "vit" || string(got.TaskConfig) != string(ck.TaskConfig) || got.Format != weightsFormat || got.Config != cfg.Resolved() ||
		len(got.Params) != 2 || got.Params["patch_embed/w"].Data[5] != 6 || got.Params["head/w"].Shape[0] != 3 {
		t.Errorf("read back %+v", got)
	}
	_, err = LoadCheckpoint(w)
	wantErr(t, err, w, "exported weights file", "not a training checkpoint")
	_, err = LoadWeights(ckPath)
	wantErr(t, err, ckPath, "is a training checkpoint", checkpointFormatV3)
	text := filepath.Join(dir, "t.txt")
	os.WriteFile(text, []byte("not safetensors at all"), 0o644)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o644)
	for path, want := range map[string]string{ckPath: FormatCheckpoint, w: FormatWeights, text: FormatOther, empty: FormatOther} {
		if k, _, err := FileFormat(path); k != want || err != nil {
			t.Errorf("FileFormat(%s) = %q, %v; want %q", path, k, err, want)
		}
	}
	if _, _, err := FileFormat(filepath.Join(dir, "none")); err == nil {
		t.Error("FileFormat of a missing file: no error")
	}
	// A refused export (non-finite weights) leaves the previous file.
	before, _ := os.ReadFile(w)
	ck.Params["head/w"].Data[1] = posInf()
	wantErr(t, ExportCheckpoint(w, ck), "non-finite")
	if after, _ := os.ReadFile(w); string(after) != string(before) {
		t.Error("a refused export changed the file")
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, ".*tmp-*")); len(ents) > 0 {
		t.Errorf("temporary files left: %v", ents)
	}
}

// TestKindOf: "" is "lm", served by the checkpoint command; a study's kind
// names its study command and that no command takes a single file; an
// unknown kind says no command of this build serves it.
func TestKindOf(t *testing.T) {
	if k := KindOf(""); k.Kind != "lm" || !k.File || !strings.Contains(k.Serving("F"), "go run ./experiments/checkpoint eval|sample -ckpt F") {
		t.Errorf("lm: %+v %s", k, k.Serving("F"))
	}
	for kind, cmd := range map[string]string{"vit": "./experiments/vision", "graph": "./experiments/graphs", "times": "./experiments/times",
		"code": "./experiments/code", "cope-tasks": "./experiments/cope"} {
		k := KindOf(kind)
		s := k.Serving("F")
		if !k.Known || k.File || !strings.Contains(s, "go run "+cmd) || !strings.Contains(s, "no command evaluates a single "+kind) ||
			!strings.Contains(s, "checkpoint info -ckpt F") {
			t.Errorf("%s: %+v %s", kind, k, s)
		}
	}
	if k := KindOf("audio"); k.Known || !strings.Contains(k.Serving(""), "no command of this build evaluates it") ||
		!strings.Contains(k.Serving(""), "info -ckpt FILE") {
		t.Errorf("unknown: %+v %s", k, k.Serving(""))
	}
	if (&Checkpoint{}).Kind() != "lm" || (&Checkpoint{Task: "graph"}).Kind() != "graph" {
		t.Error("Checkpoint.Kind")
	}
}
