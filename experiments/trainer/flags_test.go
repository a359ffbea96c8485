package trainer

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/internal/fields"
)

func parseFlags(t *testing.T, args ...string) (*ConfigFlags, Config, error) {
	t.Helper()
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cf := BindFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		return cf, cfg, err
	}
	c, err := cf.Resolve()
	return cf, c, err
}

// TestBindFlags: every option of Config has a flag of its kebab-case name,
// the aliases and -dtype work, bad values name the flag.
func TestBindFlags(t *testing.T) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	BindFlags(fs, &cfg)
	all, err := fields.Walk(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range all {
		if fs.Lookup(f.Name) == nil {
			t.Errorf("option %s (%s) has no flag", f.Name, f.Path)
		}
	}
	for _, n := range []string{"lr", "warmup", "weight-decay", "clip-norm", "batch", "seq-len", "d-model", "heads", "layers", "ffn",
		"pos", "t5-max-distance", "deberta-buckets", "init-std", "pos-init-std", "alpha", "sinusoidal-scale", "dtype", "seq", "d",
		"config", "dump-config"} {
		if fs.Lookup(n) == nil {
			t.Errorf("no flag -%s", n)
		}
	}

	_, c, err := parseFlags(t, "-lr", "1e-3", "-seq", "32", "-d", "64", "-pos", "t5", "-t5-max-distance", "77", "-alpha",
		"-dtype", "float64", "-causal=false")
	if err != nil {
		t.Fatal(err)
	}
	if c.LR != 1e-3 || c.SeqLen != 32 || c.Model.DModel != 64 || c.Model.Pos != "t5" || c.Model.PosOpts.T5MaxDistance != 77 ||
		!c.Model.PosOpts.Alpha || c.Dtype != tensor.Float64 || c.Model.Causal || c.Batch != DefaultConfig().Batch {
		t.Errorf("parsed %+v", c)
	}
	_, _, err = parseFlags(t, "-lr", "fast")
	wantErr(t, err, "-lr", `"fast" is not a number`)
	_, _, err = parseFlags(t, "-dtype", "float16")
	wantErr(t, err, "-dtype", "float16")

	var help bytes.Buffer
	cf, _, _ := parseFlags(t)
	cf.PrintUsage(&help)
	for _, s := range []string{"Model (layers.Config):", "Position encoding (posenc.Options):", "Training (trainer.Config):", "-t5-max-distance", "-d = -d-model"} {
		if !strings.Contains(help.String(), s) {
			t.Errorf("usage lacks %q:\n%s", s, help.String())
		}
	}
}

// TestConfigFile: -config starts from a file, explicit flags override it,
// -dump-config's output reads back to the same configuration, unknown
// fields are errors naming the field.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	_, c, err := parseFlags(t, "-pos", "rope", "-rope-base", "500", "-steps", "9")
	if err != nil {
		t.Fatal(err)
	}
	var dump bytes.Buffer
	if err := DumpJSON(&dump, c); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "c.json")
	os.WriteFile(file, dump.Bytes(), 0o644)
	cf, c2, err := parseFlags(t, "-config", file, "-steps", "11")
	if err != nil {
		t.Fatal(err)
	}
	want := c.Resolved()
	want.Steps = 11
	if c2 != want {
		t.Errorf("from file %+v, want %+v", c2, want)
	}
	if !cf.Explicit("rope-base") || !cf.Explicit("steps") || cf.Explicit("batch") {
		t.Error("Explicit")
	}
	os.WriteFile(file, []byte(`{"LR": 0.1, "LearningRate": 2}`), 0o644)
	_, _, err = parseFlags(t, "-config", file)
	wantErr(t, err, file, `unknown field "LearningRate"`)
	os.WriteFile(file, []byte(`{"Model": {"DModel": 8, "Width": 2}}`), 0o644)
	_, _, err = parseFlags(t, "-config", file)
	wantErr(t, err, `unknown field "Width"`)
	_, _, err = parseFlags(t, "-config", filepath.Join(dir, "none.json"))
	wantErr(t, err, "none.json")
}

// TestResumeConfig: a resumed run takes the checkpoint's configuration;
// explicit flags change only what resuming allows, and a conflicting one
// is an error naming both values; flags not given keep the checkpoint's
// values, not the defaults.
func TestResumeConfig(t *testing.T) {
	ck := tinyConfig().Resolved()
	ck.Model.DModel, ck.Steps, ck.LR = 128, 6, 2e-3
	parse := func(args ...string) (Config, *ConfigFlags) {
		t.Helper()
		cfg := DefaultConfig()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		cf := BindFlags(fs, &cfg)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		c, err := cf.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		return c, cf
	}
	cfg, cf := parse("-steps", "10", "-lr", "1e-3", "-d", "128", "-stream")
	got, err := ResumeConfig(ck, cfg, cf.Explicit)
	if err != nil {
		t.Fatal(err)
	}
	want := ck
	want.Steps, want.LR, want.Model.Stream = 10, 1e-3, true
	if err := got.Mismatch(want); err != nil || len(got.Changes(want)) != 0 || got.Batch != ck.Batch || got.Dtype != ck.Dtype {
		t.Fatalf("resumed config %+v (%v, changes %v), want %+v", got, err, got.Changes(want), want)
	}
	cfg, cf = parse("-d-model", "64", "-batch", "2", "-seed", "3")
	_, err = ResumeConfig(ck, cfg, cf.Explicit)
	wantErr(t, err, "-d-model 64 conflicts with the checkpoint's d-model=128", "-seed 3 conflicts with the checkpoint's seed=1", "-fresh")
	if strings.Contains(err.Error(), "-batch") {
		t.Fatalf("-batch 2 equals the checkpoint's and is no conflict: %v", err)
	}
	cfg, cf = parse("-dtype", "float32")
	_, err = ResumeConfig(ck, cfg, cf.Explicit)
	wantErr(t, err, "-dtype float32 conflicts with the checkpoint's dtype=float64")
}
