package trainer

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/internal/fields"
	"github.com/rpe-go/rpe/posenc"
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

// TestFlagHelp: every flag has a sentence of help, never a Go field path;
// a command of line models lists only the options its encodings read; an
// explicit 0 that stands for a default, an empty -pos, an encoding of other
// positions and an option no trained encoding reads are refused.
func TestFlagHelp(t *testing.T) {
	path := regexp.MustCompile(`\b[A-Z][A-Za-z0-9]*\.[A-Z][A-Za-z0-9]*`)
	for _, kinds := range [][]posenc.PosKind{nil, {posenc.PosLine}, {posenc.PosGrid}, {posenc.PosPairwise}} {
		cfg := DefaultConfig()
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		cf := BindFlags(fs, &cfg, kinds...)
		fs.VisitAll(func(f *flag.Flag) {
			if len(strings.Fields(f.Usage)) < 2 || path.MatchString(f.Usage) || strings.Contains(f.Usage, "undocumented") {
				t.Errorf("%v: -%s has help %q", kinds, f.Name, f.Usage)
			}
		})
		var help bytes.Buffer
		cf.PrintUsage(&help)
		if path.MatchString(strings.ReplaceAll(strings.ReplaceAll(help.String(), "(layers.Config)", ""), "(posenc.Options)", "")) {
			t.Errorf("%v: usage holds a field path:\n%s", kinds, help.String())
		}
	}
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cf := BindFlags(fs, &cfg, posenc.PosLine)
	for _, n := range []string{"grid-rows", "graph-max-degree", "cpe-kernel", "tree-max-up"} {
		if fs.Lookup(n) != nil {
			t.Errorf("a line command lists -%s", n)
		}
	}
	for _, n := range []string{"t5-buckets", "rope-base", "rope-scale", "max-len"} {
		if fs.Lookup(n) == nil {
			t.Errorf("a line command lacks -%s", n)
		}
	}
	var help bytes.Buffer
	cf.PrintUsage(&help)
	if !strings.Contains(help.String(), "default 1/√d-model = 0.08839 at d-model 128") {
		t.Errorf("the sinusoidal scale's default is not printed as docs/encodings.md states it:\n%s", help.String())
	}
	if strings.Contains(fs.Lookup("pos").Usage, "learned-2d") || !strings.Contains(fs.Lookup("pos").Usage, "rope-yarn") {
		t.Errorf("-pos of a line command: %s", fs.Lookup("pos").Usage)
	}

	parse := func(args ...string) error {
		cfg := DefaultConfig()
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cf := BindFlags(fs, &cfg, posenc.PosLine)
		if err := fs.Parse(args); err != nil {
			return err
		}
		c, err := cf.Resolve()
		if err != nil {
			return err
		}
		return cf.CheckApplies([]string{c.Resolved().Model.Pos})
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"-pos", "t5", "-t5-max-distance", "0"}, []string{"-t5-max-distance 0 would run with the default 128"}},
		{[]string{"-pos", "rope", "-rope-base", "0"}, []string{"-rope-base 0 would run with the default 10000"}},
		{[]string{"-pos", "sinusoidal", "-sinusoidal-scale", "0"}, []string{"-sinusoidal-scale 0 would run with the default 0.0883"}},
		{[]string{"-pos", "rope", "-rope-base", "0.5"}, []string{"-rope-base is 0.5, must be a finite number > 1"}},
		{[]string{"-pos", ""}, []string{"-pos is empty", "none for no position information"}},
		{[]string{"-pos", "learned-2d"}, []string{"learned-2d serves [grid] positions", "valid: none, sinusoidal"}},
		{[]string{"-pos", "nope"}, []string{`-pos "nope": unknown encoding`, "rope-llama3, or several"}},
		{[]string{"-pos", "rope", "-t5-buckets", "64"}, []string{"-t5-buckets is read by t5, not by rope"}},
		{[]string{"-grid-rows", "3"}, []string{"flag provided but not defined: -grid-rows"}},
	} {
		err := parse(c.args...)
		if err == nil {
			t.Errorf("%q accepted", c.args)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: %v, want %q", c.args, err, w)
			}
		}
		if strings.Contains(err.Error(), "learned-2d,") || strings.Contains(err.Error(), "graphormer") {
			t.Errorf("%q: the error lists encodings of other positions: %v", c.args, err)
		}
	}
	for _, ok := range [][]string{{"-pos", "t5", "-t5-max-distance", "64"}, {"-pos", "rope", "-rope-base", "500"}, {"-pos", "rope-yarn", "-yarn-attention-factor", "0"}, {"-pos", "t5+rope", "-t5-buckets", "16", "-rope-base", "100"}} {
		if err := parse(ok...); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

// TestConfigFileZero: a -config file that sets an option to a 0 standing
// for its default is refused like the flag.
func TestConfigFileZero(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(file, []byte(`{"Model": {"Pos": "t5", "PosOpts": {"T5MaxDistance": 0}}}`), 0o644)
	_, _, err := parseFlags(t, "-config", file)
	wantErr(t, err, file, "t5-max-distance 0 would run with the default 128")
	os.WriteFile(file, []byte(`{"Model": {"Pos": "t5", "PosOpts": {"T5MaxDistance": 64}}}`), 0o644)
	if _, c, err := parseFlags(t, "-config", file); err != nil || c.Model.PosOpts.T5MaxDistance != 64 {
		t.Fatalf("%v %+v", err, c.Model.PosOpts)
	}
}
