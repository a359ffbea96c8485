package clitest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/layers"
)

// commands are the main packages the corpus runs, by binary name.
var commands = []string{"train", "checkpoint", "extrapolation", "vision", "graphs", "code", "times", "stability", "bench"}

// bin is the directory of the built commands (TestMain).
var bin string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "rpe-clitest-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		root, err := moduleRoot()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		pkgs := make([]string, len(commands))
		for i, c := range commands {
			pkgs[i] = "./experiments/" + c
			if c == "bench" {
				pkgs[i] = "./bench"
			}
		}
		cmd := exec.Command("go", append([]string{"build", "-o", dir + string(os.PathSeparator)}, pkgs...)...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building the commands: %v\n%s", err, out)
			return 1
		}
		bin = dir
		return m.Run()
	}())
}

// moduleRoot is the directory of go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// probe is one invocation: cmd args... run in the fixture directory ({dir}
// in an argument is replaced by it) must exit with status and print each of
// want on stderr, and change nothing in the fixture directory.
type probe struct {
	cmd    string
	args   []string
	status int
	want   []string
}

// badInputs is the corpus. Each row names the issue point it comes from.
var badInputs = []probe{
	// Study commands: a job number below -1 ran the whole study (30.9).
	{"extrapolation", []string{"-job", "-5"}, 2, []string{"-job -5", "omit -job"}},
	{"vision", []string{"-job", "-5"}, 2, []string{"-job -5"}},
	{"graphs", []string{"-job", "-5"}, 2, []string{"-job -5"}},
	{"code", []string{"-job", "-5"}, 2, []string{"-job -5"}},
	{"times", []string{"-job", "-5"}, 2, []string{"-job -5"}},
	{"stability", []string{"-job", "-5"}, 2, []string{"-job -5"}},
	{"extrapolation", []string{"-job", "99"}, 2, []string{"-job 99", "6 jobs"}},
	{"graphs", []string{"-job", "99"}, 2, []string{"-job 99", "see -jobs"}},
	// Encodings the 1-D study cannot train failed at build, leaving a folder (30.6).
	{"extrapolation", []string{"-encodings", "rope-2d", "-out", "{dir}/ex"}, 2, []string{`"rope-2d" does not serve a line of text`, "grid"}},
	{"extrapolation", []string{"-encodings", "tree", "-out", "{dir}/ex"}, 2, []string{`"tree" does not serve a line of text`}},
	{"extrapolation", []string{"-encodings", "graphormer-spatial", "-out", "{dir}/ex"}, 2, []string{`"graphormer-spatial" does not serve a line of text`}},
	{"extrapolation", []string{"-encodings", "nope", "-out", "{dir}/ex"}, 2, []string{`unknown encoding "nope"`}},
	{"extrapolation", []string{"-encodings", "rope-pi", "-out", "{dir}/ex"}, 2, []string{"evaluation-time scaling"}},
	// Output paths checked first, and named for what is wrong (30.6).
	{"extrapolation", []string{"-out", "{dir}/corpus.txt/sub"}, 2, []string{"-out", "corpus.txt is a file, not a directory"}},
	{"vision", []string{"-out", "{dir}/corpus.txt/sub"}, 2, []string{"-out", "corpus.txt is a file, not a directory"}},
	{"graphs", []string{"-out", "{dir}/corpus.txt"}, 2, []string{"-out", "is a file, not a directory"}},
	{"train", []string{"-corpus", "{dir}/corpus.txt", "-ckpt", "{dir}/corpus.txt/x.ckpt"}, 2, []string{"-ckpt", "corpus.txt: it exists and is a file, not a directory"}},
	{"train", []string{"-corpus", "{dir}/corpus.txt", "-ckpt", "/proc/rpe-clitest/x.ckpt"}, 2, []string{"-ckpt", "/proc/rpe-clitest cannot be created"}},
	// -render of a directory that does not exist (30.9).
	{"extrapolation", []string{"-render", "-out", "{dir}/missing"}, 2, []string{"-render", "missing does not exist"}},
	{"graphs", []string{"-render", "-out", "{dir}/missing"}, 2, []string{"-render", "missing does not exist"}},
	{"vision", []string{"-render", "-out", "{dir}/corpus.txt"}, 2, []string{"-render", "is a file"}},
	// bench: -h exits 0, errors carry one prefix (30.9).
	{"bench", []string{"-h"}, 0, nil},
	{"bench", []string{"-cost", "-go-only", "-mem-limit", "0"}, 2, []string{"bench: -mem-limit 0 GiB must be positive"}},
	{"bench", []string{"-cost", "-go-only", "-modes", "fwd,eval"}, 2, []string{"not a mode"}},
	{"bench", []string{"-threads", "x"}, 2, []string{"bad thread count"}},
	// Resuming keeps the checkpoint's model; a conflicting flag names both values (30.8).
	{"train", []string{"-ckpt", "{dir}/lm.ckpt", "-d-model", "64"}, 2, []string{"-d-model 64 conflicts with the checkpoint's d-model=16"}},
	{"train", []string{"-ckpt", "{dir}/lm.ckpt", "-pos", "alibi"}, 2, []string{"-pos alibi conflicts with the checkpoint's pos=rope"}},
	{"train", []string{"-resume", "{dir}/corpus.txt", "-ckpt", "{dir}/new.ckpt"}, 2, []string{"corpus.txt"}},
	// -redo names only encodings of the plan (30.7).
	{"graphs", []string{"-redo", "nope"}, 2, []string{"-redo", "nope"}},
	{"vision", []string{"-redo", "rope,nope"}, 2, []string{"-redo", "nope"}},
	// An explicit 0 ran with the default and labelled the rows with 0 (30.4).
	{"train", []string{"-pos", "t5", "-t5-max-distance", "0", "-ckpt", "{dir}/new.ckpt"}, 2, []string{"-t5-max-distance 0 would run with the default 128", "integer >= 1"}},
	{"train", []string{"-pos", "rope", "-rope-base", "0", "-ckpt", "{dir}/new.ckpt"}, 2, []string{"-rope-base 0 would run with the default 10000"}},
	{"train", []string{"-pos", "rope", "-rope-base", "0.5", "-ckpt", "{dir}/new.ckpt"}, 2, []string{"-rope-base is 0.5, must be a finite number > 1"}},
	{"train", []string{"-config", "{dir}/zero.json", "-ckpt", "{dir}/new.ckpt"}, 2, []string{"zero.json", "t5-max-distance 0 would run with the default"}},
	{"extrapolation", []string{"-encodings", "t5@t5-max-distance=0", "-jobs"}, 2, []string{"t5-max-distance 0 would run with the default 128"}},
	{"vision", []string{"-encodings", "cpe@cpe-kernel=0", "-jobs"}, 2, []string{"cpe-kernel 0 would run with the default 3", "odd integer"}},
	{"vision", []string{"-patch", "0"}, 2, []string{"-patch 0", ">= 1"}},
	{"vision", []string{"-test-images", "-5"}, 2, []string{"-test-images -5", ">= 0"}},
	{"vision", []string{"-steps", "0"}, 2, []string{"-steps 0", ">= 1"}},
	{"extrapolation", []string{"-steps", "0", "-jobs"}, 2, []string{"steps is 0, must be positive"}},
	{"stability", []string{"-high-lr", "0"}, 2, []string{"-high-lr 0 must be positive"}},
	// An option that no trained encoding reads was ignored (30.4, 30.10).
	{"train", []string{"-pos", "rope", "-t5-buckets", "64", "-ckpt", "{dir}/new.ckpt"}, 2, []string{"-t5-buckets is read by t5, not by rope"}},
	{"train", []string{"-grid-rows", "3"}, 2, []string{"flag provided but not defined: -grid-rows"}},
	{"extrapolation", []string{"-graph-max-degree", "3"}, 2, []string{"flag provided but not defined: -graph-max-degree"}},
	{"extrapolation", []string{"-encodings", "rope", "-cope-npos", "8", "-jobs"}, 2, []string{"-cope-npos is read by cope, not by rope"}},
	// -pos '' meant none; repeated parts; errors list only the command's encodings (30.9).
	{"train", []string{"-pos", "", "-ckpt", "{dir}/new.ckpt"}, 2, []string{"-pos is empty", "none for no position information"}},
	{"train", []string{"-pos", "learned-2d", "-ckpt", "{dir}/new.ckpt"}, 2, []string{"learned-2d serves [grid] positions", "valid: none, sinusoidal"}},
	{"graphs", []string{"-encodings", "laplacian+laplacian", "-jobs"}, 2, []string{"laplacian appears twice"}},
	{"graphs", []string{"-encodings", "graphormer-spatial+graphormer-spatial", "-jobs"}, 2, []string{"graphormer-spatial appears twice"}},
	{"vision", []string{"-encodings", "nope", "-jobs"}, 2, []string{`encoding "nope" is unknown (valid here: none, sinusoidal`, "rope-mixed, cpe, or several"}},
	{"graphs", []string{"-encodings", "rope", "-jobs"}, 2, []string{"this study's models take pairwise positions (valid here: none, graphormer-spatial"}},
	{"times", []string{"-encodings", "swin", "-jobs"}, 2, []string{"swin serves grid positions"}},
	{"bench", []string{"-go-only", "-pos", "swin"}, 2, []string{"bench: flag -pos swin serves [grid] positions"}},
	// Usage errors that already named their flag (kept as probes).
	{"train", []string{"-lr", "x"}, 2, []string{"lr"}},
	{"train", []string{"-pos", "nope"}, 2, []string{`-pos "nope": unknown encoding`}},
	{"train", []string{"-fresh", "-resume", "{dir}/lm.ckpt"}, 2, []string{"-fresh and -resume"}},
	{"train", []string{"-corpus", "{dir}/missing.txt", "-ckpt", "{dir}/new.ckpt"}, 2, []string{"missing.txt"}},
	{"train", []string{"stray"}, 2, []string{"unexpected arguments"}},
	{"extrapolation", []string{"-preset", "huge"}, 2, []string{`unknown preset "huge"`}},
	{"extrapolation", []string{"-seeds", "1,a", "-jobs"}, 2, []string{`"a" is not an integer`}},
	{"extrapolation", []string{"-encodings", "t5@nope=1", "-jobs"}, 2, []string{`unknown option "nope"`}},
	{"extrapolation", []string{"-fresh", "-render"}, 2, []string{"-fresh deletes"}},
	{"vision", []string{"-preset", "huge"}, 2, []string{"huge"}},
	{"graphs", []string{"-seeds", "x"}, 2, []string{`"x" is not an integer`}},
	{"checkpoint", nil, 2, []string{"usage: checkpoint"}},
	{"checkpoint", []string{"frob"}, 2, []string{`unknown subcommand "frob"`}},
	{"checkpoint", []string{"eval"}, 2, []string{"-ckpt is required"}},
	{"checkpoint", []string{"eval", "-ckpt", "{dir}/lm.ckpt", "-len", "0"}, 2, []string{"-len", "positive"}},
	{"checkpoint", []string{"eval", "-ckpt", "{dir}/lm.ckpt", "-batch", "0"}, 2, []string{"-batch"}},
	{"checkpoint", []string{"eval", "-ckpt", "{dir}/missing.ckpt"}, 1, []string{"missing.ckpt"}},
	{"checkpoint", []string{"info", "-ckpt", "{dir}/corpus.txt"}, 1, []string{"corpus.txt"}},
	{"checkpoint", []string{"sample", "-ckpt", "{dir}/lm.ckpt", "-len", "-1"}, 2, []string{"-len -1"}},
	{"checkpoint", []string{"export", "-ckpt", "{dir}/lm.ckpt"}, 2, []string{"-out is required"}},
	// A non-finite temperature was accepted (30.9).
	{"checkpoint", []string{"sample", "-ckpt", "{dir}/lm.ckpt", "-temp", "NaN"}, 2, []string{"-temp NaN", "finite"}},
	{"checkpoint", []string{"sample", "-ckpt", "{dir}/lm.ckpt", "-temp", "Inf"}, 2, []string{"-temp +Inf", "finite"}},
	{"checkpoint", []string{"sample", "-ckpt", "{dir}/lm.ckpt", "-temp", "-Inf"}, 2, []string{"-temp -Inf", "finite"}},
	// Evaluation had no memory bound (30.1): a window longer than the text,
	// and a graph over the memory, are refused before allocating.
	{"checkpoint", []string{"eval", "-ckpt", "{dir}/lm.ckpt", "-len", "100000000"}, 2, []string{"-len 100000000", "too short for one window", "smaller -len"}},
	{"checkpoint", []string{"eval", "-ckpt", "{dir}/lm.ckpt", "-len", "2000", "-stream=false", "-mem-limit", "0.02"}, 2,
		[]string{"-len 2000", "evaluation needs about", "materialised attention", "more than the 20.5 MiB available", "-stream (the streaming attention, O(T) memory) needs about"}},
	{"checkpoint", []string{"eval", "-ckpt", "{dir}/lm.ckpt", "-len", "2000", "-stream", "-mem-limit", "0.001"}, 2,
		[]string{"-len 2000", "streaming attention", "more than the 1.0 MiB available", "smaller -len or -batch"}},
	{"checkpoint", []string{"eval", "-ckpt", "{dir}/lm.ckpt", "-stream=maybe"}, 2, []string{"-stream", "true, false or auto"}},
	{"checkpoint", []string{"eval", "-ckpt", "{dir}/lm.ckpt", "-mem-limit", "-1"}, 2, []string{"-mem-limit -1"}},
	{"checkpoint", []string{"sample", "-ckpt", "{dir}/lm.ckpt", "-mem-limit", "NaN"}, 2, []string{"-mem-limit NaN"}},
	// export overwrote its source (30.2): -out the checkpoint itself (by any
	// path), another training checkpoint or another file needs -force; a
	// directory is refused.
	{"checkpoint", []string{"export", "-ckpt", "{dir}/lm.ckpt", "-out", "{dir}/lm.ckpt"}, 2, []string{"-out {dir}/lm.ckpt is the checkpoint", "-force"}},
	{"checkpoint", []string{"export", "-ckpt", "lm.ckpt", "-out", "{dir}/./lm.ckpt"}, 2, []string{"is the checkpoint -ckpt lm.ckpt", "-force"}},
	{"checkpoint", []string{"export", "-ckpt", "{dir}/lm.ckpt", "-out", "{dir}/vit.ckpt"}, 2, []string{"-out {dir}/vit.ckpt holds a training checkpoint", "-force"}},
	{"checkpoint", []string{"export", "-ckpt", "{dir}/lm.ckpt", "-out", "{dir}/corpus.txt"}, 2, []string{"-out {dir}/corpus.txt", "not an exported weights file", "-force"}},
	{"checkpoint", []string{"export", "-ckpt", "{dir}/lm.ckpt", "-out", "{dir}", "-force"}, 2, []string{"-out {dir} is a directory"}},
	// A checkpoint of another kind failed with "vocab 0" (30.5): named, with what serves it.
	{"checkpoint", []string{"eval", "-ckpt", "{dir}/vit.ckpt"}, 2, []string{"holds a vit model", "not a byte language model", "go run ./experiments/vision", "checkpoint info -ckpt"}},
	{"checkpoint", []string{"sample", "-ckpt", "{dir}/vit.ckpt"}, 2, []string{"holds a vit model", "go run ./experiments/vision"}},
	{"checkpoint", []string{"eval", "-ckpt", "{dir}/lm.weights"}, 1, []string{"lm.weights", "exported weights file", "not a training checkpoint"}},
	{"checkpoint", []string{"info", "-ckpt", "{dir}/lm.weights"}, 0, nil},
	{"checkpoint", []string{"info", "-ckpt", "{dir}/vit.ckpt"}, 0, nil},
}

// TestBadInputs runs the corpus: each invocation exits with its status,
// names what is wrong, and leaves the fixture directory as it was.
func TestBadInputs(t *testing.T) {
	dir := fixture(t)
	for i, p := range badInputs {
		args := make([]string, len(p.args))
		for j, a := range p.args {
			args[j] = strings.ReplaceAll(a, "{dir}", dir)
		}
		name := fmt.Sprintf("%02d %s %s", i, p.cmd, strings.Join(p.args, " "))
		t.Run(name, func(t *testing.T) {
			before := snapshot(t, dir)
			status, stderr := runIn(t, dir, p.cmd, args...)
			if status != p.status {
				t.Errorf("exit status %d, want %d; stderr:\n%s", status, p.status, stderr)
			}
			for _, w := range p.want {
				if !strings.Contains(stderr, strings.ReplaceAll(w, "{dir}", dir)) {
					t.Errorf("stderr does not contain %q:\n%s", w, stderr)
				}
			}
			if d := diffSnapshots(before, snapshot(t, dir)); d != "" {
				t.Errorf("the invocation changed the fixture directory:\n%s", d)
			}
		})
	}
	t.Logf("%d probes of bad input", len(badInputs))
}

// fixture makes the working directory of the probes: corpus.txt (a small
// text), lm.ckpt, a tiny language model trained on it for 2 updates,
// lm.weights, its weights exported by `checkpoint export`, and vit.ckpt, a
// checkpoint of kind "vit" (writeViT).
func fixture(t *testing.T) string {
	dir := t.TempDir()
	var b strings.Builder
	for i := 0; b.Len() < 24<<10; i++ {
		fmt.Fprintf(&b, "Line %d: light is refracted by the prism, and the colours are separated by their refrangibility. ", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "corpus.txt"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "zero.json"), []byte(`{"Model": {"Pos": "t5", "PosOpts": {"T5MaxDistance": 0}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	status, stderr := runIn(t, dir, "train", "-corpus", filepath.Join(dir, "corpus.txt"), "-ckpt", filepath.Join(dir, "lm.ckpt"),
		"-d-model", "16", "-heads", "2", "-layers", "1", "-ffn", "32", "-seq-len", "16", "-batch", "2", "-steps", "2",
		"-warmup", "1", "-sample", "0", "-eval-batch", "4", "-pos", "rope")
	if status != 0 {
		t.Fatalf("training the fixture checkpoint: exit %d\n%s", status, stderr)
	}
	if status, stderr := runIn(t, dir, "checkpoint", "export", "-ckpt", filepath.Join(dir, "lm.ckpt"), "-out", filepath.Join(dir, "lm.weights")); status != 0 {
		t.Fatalf("exporting the fixture checkpoint: exit %d\n%s", status, stderr)
	}
	writeViT(t, filepath.Join(dir, "vit.ckpt"))
	return dir
}

// writeViT writes a checkpoint of kind "vit" to path, as the vision study's
// engine (trainer.RunTask) records one: task "vit", a task configuration,
// an encoder without a vocabulary. Its weights are not a trained model.
func writeViT(t *testing.T, path string) {
	t.Helper()
	cfg := trainer.DefaultConfig()
	cfg.Model = layers.Config{DModel: 4, Heads: 1, Layers: 1, FFN: 8, Eps: 1e-5, InitStd: 0.02, Pos: "rope-2d"}
	ck := &trainer.Checkpoint{Config: cfg, Step: 1, Task: "vit", TaskConfig: []byte(`{"patch":4,"classes":10}`), Params: map[string]trainer.Tensor{
		"patch_embed/w": {Shape: []int{16, 4}, Data: make([]float64, 64)},
		"patch_embed/b": {Shape: []int{4}, Data: make([]float64, 4)},
		"head/w":        {Shape: []int{4, 10}, Data: make([]float64, 40)},
	}}
	if err := ck.Save(path); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointKinds: export writes the weights of a checkpoint of any
// kind, and info reads what export wrote (30.5).
func TestCheckpointKinds(t *testing.T) {
	dir := fixture(t)
	out := t.TempDir()
	w := filepath.Join(out, "vit.weights")
	status, stdout, stderr := runOut(t, dir, "checkpoint", "export", "-ckpt", filepath.Join(dir, "vit.ckpt"), "-out", w)
	if status != 0 || !strings.Contains(stdout, "the weights of a vit model") {
		t.Errorf("export of vit.ckpt: exit %d\n%s%s", status, stdout, stderr)
	}
	for file, want := range map[string][]string{
		w:                                {"exported weights", "kind: vit", `"Pos": "rope-2d"`, "patch_embed/w", "[16 4]"},
		filepath.Join(dir, "lm.weights"): {"exported weights", "kind: lm", `"Pos": "rope"`, "tok_emb", "[256 16]", "head/w"},
		filepath.Join(dir, "vit.ckpt"):   {"training checkpoint", "kind: vit", "go run ./experiments/vision", "patch_embed/b"},
	} {
		status, stdout, stderr := runOut(t, dir, "checkpoint", "info", "-ckpt", file)
		if status != 0 {
			t.Errorf("info %s: exit %d\n%s", file, status, stderr)
		}
		for _, s := range want {
			if !strings.Contains(stdout, s) {
				t.Errorf("info %s lacks %q:\n%s", file, s, stdout)
			}
		}
	}
}

// runIn runs bin/cmd args in dir and returns its exit status and stderr.
func runIn(t *testing.T, dir, cmd string, args ...string) (int, string) {
	t.Helper()
	status, _, stderr := runOut(t, dir, cmd, args...)
	return status, stderr
}

// runOut runs bin/cmd args in dir and returns its exit status, stdout and
// stderr.
func runOut(t *testing.T, dir, cmd string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, filepath.Join(bin, cmd), args...)
	c.Dir = dir
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %q did not end within 2 minutes", cmd, args)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	if err != nil {
		t.Fatalf("%s %q: %v", cmd, args, err)
	}
	return 0, stdout.String(), stderr.String()
}

// snapshot describes every file and directory below dir: path, mode, size,
// modification time and SHA-256 of the contents.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%v %d %s", info.Mode(), info.Size(), info.ModTime().Format(time.RFC3339Nano))
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// diffSnapshots lists what differs between two snapshots ("" if nothing).
func diffSnapshots(a, b map[string]string) string {
	var d []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			d = append(d, "removed "+k)
		} else if v != w && k != "." {
			d = append(d, "changed "+k+": "+v+" -> "+w)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			d = append(d, "created "+k)
		}
	}
	sort.Strings(d)
	return strings.Join(d, "\n")
}

// TestHelp: every command's -h exits 0 and gives every flag a sentence,
// never a Go field path ("Model.PosOpts.GridRows"); the text commands do not
// list the options of image or graph encodings (30.10).
func TestHelp(t *testing.T) {
	dir := t.TempDir()
	path := regexp.MustCompile(`\b(Model|PosOpts|Encoder)\.[A-Z]`)
	flagLine := regexp.MustCompile(`^\s+-(\S+)\s*(.*)$`)
	for _, c := range [][]string{{"train"}, {"extrapolation"}, {"bench"}, {"vision"}, {"graphs"}, {"code"}, {"times"}, {"stability"},
		{"checkpoint", "eval"}, {"checkpoint", "sample"}, {"checkpoint", "export"}, {"checkpoint", "info"}} {
		status, stderr := runIn(t, dir, c[0], append(c[1:], "-h")...)
		if status != 0 {
			t.Errorf("%v -h: exit %d", c, status)
		}
		if m := path.FindString(stderr); m != "" {
			t.Errorf("%v -h shows a field path %q:\n%s", c, m, stderr)
		}
		lines := strings.Split(stderr, "\n")
		for i, l := range lines {
			m := flagLine.FindStringSubmatch(l)
			if m == nil || strings.HasPrefix(m[1], "-") {
				continue
			}
			help := m[2]
			if len(strings.Fields(help)) < 2 && i+1 < len(lines) && flagLine.FindStringSubmatch(lines[i+1]) == nil {
				help = strings.TrimSpace(lines[i+1]) // the flag package's format: "-name type", then the help
			}
			if len(strings.Fields(help)) < 2 {
				t.Errorf("%v -h: -%s has no sentence of help (%q)", c, m[1], help)
			}
		}
		if c[0] == "train" || c[0] == "extrapolation" {
			for _, n := range []string{"-grid-rows", "-graph-max-degree", "-cpe-kernel", "-tree-max-up"} {
				if strings.Contains(stderr, n+" ") {
					t.Errorf("%s -h lists %s, which no encoding of a text model reads", c[0], n)
				}
			}
		}
	}
}
