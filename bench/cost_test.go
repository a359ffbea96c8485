package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for the bench command when
// runCost starts it as a child (os.Executable is the test binary), and
// for the memory hog of TestRunWatched.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "-eval-child" {
		main()
		os.Exit(0)
	}
	if len(os.Args) > 1 && os.Args[1] == "-hog-child" {
		hogChild(os.Args[2:])
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// hogChild is the child of TestRunWatched: it touches MiB mebibytes, then
// either writes a report at once ("exit") or sleeps a minute ("sleep"),
// far longer than the watchdog's poll, so that only a kill ends it early.
func hogChild(args []string) {
	var mib int
	var then string
	fmt.Sscan(args[0], &mib)
	then = args[1]
	buf := make([]byte, mib<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	if then == "sleep" {
		time.Sleep(time.Minute)
	}
	fmt.Printf("{\"loss\":%d}\n", buf[len(buf)-1])
}

// TestRunWatched: a child that holds 64 MiB and does not end by itself is
// killed under a 16 MiB limit, and reports the RSS it was killed at; the
// same child under no limit, or one that ends at once, is not killed and
// its report is read. The hog outlives the poll by construction (a minute
// against 20 ms), so the outcome does not depend on timing.
func TestRunWatched(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	hog := func(mib int, then string) *exec.Cmd { return exec.Command(self, "-hog-child", fmt.Sprint(mib), then) }
	start := time.Now()
	_, seen, killed, err := runWatched(hog(64, "sleep"), 16<<20)
	if err != nil || !killed || seen <= 16<<20 || time.Since(start) > 30*time.Second {
		t.Fatalf("64 MiB hog under a 16 MiB limit: seen %d, killed %v, err %v after %s; want killed above the limit", seen, killed, err, time.Since(start))
	}
	rep, _, killed, err := runWatched(hog(4, "exit"), 0)
	if err != nil || killed || rep.Loss != float64(((4<<20)-1)%256) {
		t.Fatalf("a child that ends, no limit: report %+v, killed %v, err %v", rep, killed, err)
	}
}

// TestFitPowerLaw fits exact power laws (the exponent and the constant to
// 1e-12) and refuses what it cannot fit.
func TestFitPowerLaw(t *testing.T) {
	x := []float64{2048, 4096, 8192, 16384}
	for _, want := range []float64{1, 1.7, 2, 0.25} {
		y := make([]float64, len(x))
		for i := range x {
			y[i] = 3.5 * math.Pow(x[i], want)
		}
		k, c, ok := fitPowerLaw(x, y)
		if !ok || math.Abs(k-want) > 1e-12 || math.Abs(c/3.5-1) > 1e-9 {
			t.Errorf("y = 3.5·x^%v: fit k %v, c %v, ok %v", want, k, c, ok)
		}
	}
	for _, c := range []struct{ x, y []float64 }{
		{[]float64{512}, []float64{1}},
		{[]float64{512, 512}, []float64{1, 2}},
		{[]float64{512, 1024}, []float64{1, 0}},
		{[]float64{512, 1024}, []float64{1}},
	} {
		if _, _, ok := fitPowerLaw(c.x, c.y); ok {
			t.Errorf("fit of %v, %v: ok, want refused", c.x, c.y)
		}
	}
}

// TestEstimatePeak extrapolates the added memory with the slope of the two
// largest smaller lengths (at least 1), and skips after an over-limit cell.
func TestEstimatePeak(t *testing.T) {
	r := &costResults{Cells: []*costCell{
		{Pos: "a", Side: "go", Mode: "fwd", T: 512, Status: cellOK, BaseRSS: 100, PeakRSS: 110},
		{Pos: "a", Side: "go", Mode: "fwd", T: 1024, Status: cellOK, BaseRSS: 100, PeakRSS: 140},
		{Pos: "a", Side: "go", Mode: "fwd", T: 8192, Status: cellOverLimit},
		{Pos: "b", Side: "go", Mode: "fwd", T: 512, Status: cellOK, BaseRSS: 100, PeakRSS: 200},
		{Pos: "b", Side: "go", Mode: "fwd", T: 1024, Status: cellOK, BaseRSS: 100, PeakRSS: 210},
	}}
	// a: added 10 -> 40, slope 2: 40·4² at 4096.
	if est, over := estimatePeak(r, "a", "go", "fwd", 4096); over != "" || math.Abs(est-(100+40*16)) > 1e-9 {
		t.Errorf("a at 4096: %v %q, want %v", est, over, 100+40*16)
	}
	if _, over := estimatePeak(r, "a", "go", "fwd", 16384); !strings.Contains(over, "T = 8192 was over the limit") {
		t.Errorf("a at 16384: %q, want the over-limit reason", over)
	}
	// b: added 100 -> 110, slope below 1, so 1: 110·4.
	if est, _ := estimatePeak(r, "b", "go", "fwd", 4096); math.Abs(est-(100+440)) > 1e-9 {
		t.Errorf("b at 4096: %v, want %v", est, 100+440)
	}
	if est, over := estimatePeak(r, "b", "pytorch", "fwd", 4096); est != 0 || over != "" {
		t.Errorf("no cells: %v %q", est, over)
	}
}

// costFlagsTiny are the flags of the tests' runs: a tiny model, Go only.
var costFlagsTiny = []string{"-cost", "-go-only", "-d-model", "32", "-heads", "4", "-layers", "1", "-ffn", "64", "-threads", "1"}

func runCostArgs(t *testing.T, args ...string) string {
	t.Helper()
	o, err := parseFlags(append(append([]string(nil), costFlagsTiny...), args...))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := runCost(o, &out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func readCells(t *testing.T, dir string) *costResults {
	t.Helper()
	r, err := readCostResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCostQuick runs the quick preset's encodings, both modes, at two
// short lengths on a tiny model, Go only: every cell ok and streamed, the
// four files written, the tables complete; a second run keeps every cell
// (a marked cell keeps its mark), -redo reruns one encoding only, and
// -render renders from results.json alone.
func TestCostQuick(t *testing.T) {
	dir := t.TempDir()
	out := runCostArgs(t, "-preset", "quick", "-seq", "32,64", "-out", dir)
	r := readCells(t, dir)
	if len(r.Cells) != 3*2*2 {
		t.Fatalf("%d cells, want 12", len(r.Cells))
	}
	for _, c := range r.Cells {
		if c.Status != cellOK || !c.Stream || c.Side != "go" || len(c.Times) != 3 || c.Warmup != 1 || !(c.MsPerToken > 0) || c.PeakRSS < c.BaseRSS {
			t.Fatalf("cell %s: %+v", c.key(), c)
		}
	}
	for _, f := range []string{"results.json", "results.csv", "table.md", "cost.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	for _, want := range []string{"## fwd: forward pass (no gradient), ms per token", "## train: training step",
		"| rope | Go (stream) |", "| alibi | Go (stream) |", "| t5 | Go (stream) |", "| 32 | 64 |"} {
		if !strings.Contains(out, want) {
			t.Fatalf("table lacks %q:\n%s", want, out)
		}
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "results.csv"))
	if n := strings.Count(string(csv), "\n"); n != 13 {
		t.Fatalf("results.csv has %d lines, want 13", n)
	}

	// Mark every cell; a rerun must keep the marks.
	for _, c := range r.Cells {
		c.MsPerToken = 123
	}
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	runCostArgs(t, "-preset", "quick", "-seq", "32,64", "-out", dir)
	for _, c := range readCells(t, dir).Cells {
		if c.MsPerToken != 123 {
			t.Fatalf("cell %s was rerun", c.key())
		}
	}
	runCostArgs(t, "-preset", "quick", "-seq", "32,64", "-out", dir, "-redo", "alibi")
	for _, c := range readCells(t, dir).Cells {
		if (c.MsPerToken == 123) != (c.Pos != "alibi") {
			t.Fatalf("after -redo alibi, cell %s has %v ms/token", c.key(), c.MsPerToken)
		}
	}
	if err := os.Remove(filepath.Join(dir, "table.md")); err != nil {
		t.Fatal(err)
	}
	if out := runCostArgs(t, "-render", "-out", dir); !strings.Contains(out, "| 123.0000 |") {
		t.Fatalf("-render: %s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "table.md")); err != nil {
		t.Fatal(err)
	}
	// Another setup is refused.
	o, err := parseFlags(append(append([]string(nil), costFlagsTiny...), "-d-model", "64", "-out", dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := runCost(o, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "another setup") {
		t.Fatalf("another model in the same -out: %v", err)
	}
}

// TestCostWatchdog: under a memory limit below the child's RSS, the first
// cell is killed ("over limit") and the longer one is skipped for it; the
// table shows both; -cost-stream false materialises.
func TestCostWatchdog(t *testing.T) {
	dir := t.TempDir()
	out := runCostArgs(t, "-pos", "alibi", "-modes", "fwd", "-seq", "32,64", "-mem-limit", "0.001", "-cost-stream", "false", "-out", dir)
	r := readCells(t, dir)
	a, b := r.find("alibi", "go", "fwd", 32), r.find("alibi", "go", "fwd", 64)
	// Both honest outcomes count: the watchdog killed the child ("killed at
	// RSS"), or the child ended between two polls and its own peak RSS was
	// over the limit ("peak RSS"). At T = 32 the child takes ~10 ms, under
	// the 20 ms poll, so either can happen; TestRunWatched checks the kill.
	if a == nil || a.Status != cellOverLimit || !(strings.Contains(a.Reason, "killed at RSS") || strings.Contains(a.Reason, "peak RSS")) ||
		!strings.Contains(a.Reason, "> -mem-limit 0.001 GiB") || a.PeakRSS <= 1<<20 {
		t.Fatalf("T = 32: %+v, want over limit", a)
	}
	if b == nil || b.Status != cellSkipped || !strings.Contains(b.Reason, "T = 32 was over the limit") {
		t.Fatalf("T = 64: %+v, want skipped", b)
	}
	if !strings.Contains(out, "| alibi | Go | over limit | skipped |") || !strings.Contains(out, "alibi, Go, fwd, T = 32: over limit") {
		t.Fatalf("table:\n%s", out)
	}
	// A larger limit reruns the over-limit cell, materialised.
	runCostArgs(t, "-pos", "alibi", "-modes", "fwd", "-seq", "32", "-cost-stream", "false", "-out", dir)
	if c := readCells(t, dir).find("alibi", "go", "fwd", 32); c.Status != cellOK || c.Stream {
		t.Fatalf("T = 32 at the default limit: %+v", c)
	}
}

// TestCostFlags checks the flag errors and the preset defaults.
func TestCostFlags(t *testing.T) {
	o, err := parseFlags([]string{"-cost", "-go-only"})
	if err != nil {
		t.Fatal(err)
	}
	co := o.costOpts
	if o.shape.Batch != 1 || len(co.seqs) != 6 || co.seqs[5] != 16384 || len(o.pos) != len(Encodings) ||
		co.out != filepath.Join("runs", "cost", "full") || len(co.modes) != 2 || o.threads[0] != 2 || co.memLimit != 8 {
		t.Fatalf("full defaults: batch %d, %+v, %d encodings, threads %v", o.shape.Batch, co, len(o.pos), o.threads)
	}
	o, err = parseFlags([]string{"-cost", "-pos", "alibi,rope", "-seq=4096,8192", "-modes", "fwd"})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.costOpts.seqs) != 2 || o.costOpts.seqs[1] != 8192 || len(o.pos) != 2 || o.goOnly {
		t.Fatalf("-seq 4096,8192: %+v, pos %v", o.costOpts, o.pos)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-preset", "huge"}, "-preset"},
		{[]string{"-modes", "fwd,eval"}, "not a mode"},
		{[]string{"-seq", "512,x"}, "bad length"},
		{[]string{"-cost-stream", "maybe"}, "-cost-stream"},
		{[]string{"-mem-limit", "0"}, "must be positive"},
		{[]string{"-seq-len", "512"}, "not -seq-len"},
		{[]string{"-stream"}, "-cost-stream"},
	} {
		if _, err := parseFlags(append([]string{"-cost", "-go-only"}, c.args...)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
}

// TestTrainChildLong runs one training step at T = 6600 (tiny model,
// streamed): the child's corpus must leave a whole window to the
// trainer's validation part (the last 10%), which 4·(T+1) bytes did not.
func TestTrainChildLong(t *testing.T) {
	sh := Shape{Batch: 1, Seq: 6600, DModel: 16, Heads: 2, Layers: 1, FFN: 32, Vocab: 256}
	sh.Base = benchBase()
	sh.Base.Model.Stream = true
	var buf strings.Builder
	if err := trainChild(&buf, sh, "alibi", []int{2}, 0, 1); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"2t":[`) {
		t.Fatalf("report %s", buf.String())
	}
}

// TestCostTargetsAndSummary renders synthetic cells: the targets name the
// encodings that meet and miss the time target in each mode (the worst
// ratio at T >= 4096, 512 ignored), and the summary rows carry the cells'
// values, ratios and the PyTorch cells skipped by the memory estimate.
func TestCostTargetsAndSummary(t *testing.T) {
	var cells []*costCell
	add := func(pos, side, mode string, T int, ms, mib float64) {
		cells = append(cells, &costCell{Pos: pos, Side: side, Mode: mode, T: T, Status: cellOK, MsPerToken: ms, AddedMiB: mib, Stream: side == "go"})
	}
	for _, mode := range []string{"fwd", "train"} {
		f := map[string]float64{"fwd": 1, "train": 3}[mode]
		for _, T := range []int{512, 4096, 8192, 16384} {
			x := float64(T) / 4096
			add("fast", "go", mode, T, 0.1*f*x, 100*x)
			add("slow", "go", mode, T, 0.3*f*x, 120*x)
			if T == 16384 {
				cells = append(cells, &costCell{Pos: "fast", Side: "pytorch", Mode: mode, T: T, Status: cellSkipped},
					&costCell{Pos: "slow", Side: "pytorch", Mode: mode, T: T, Status: cellSkipped})
				continue
			}
			py := 0.4 * f * x
			if T == 512 {
				py = 0.01 // a ratio of 10 at 512 does not count
			}
			add("fast", "pytorch", mode, T, py, 1000*x*x)
			slowPy := py
			if mode == "train" && T == 8192 {
				slowPy = 0.3 * f * x * 1.25 // 0.8
			}
			add("slow", "pytorch", mode, T, slowPy, 1000*x*x)
		}
	}
	v := newCostView(&costResults{Cells: cells})
	var b strings.Builder
	v.targets(&b)
	for _, want := range []string{
		"at T = 16384, added peak RSS under 1 GiB: fast, slow; above: none",
		"forward pass (no gradient): Go's time per token at T ≥ 4096 at most 0.5x PyTorch's (worst ratio where PyTorch ran): met by fast (0.25); missed by slow (0.75).",
		"training step (forward, backward, clipping, AdamW): Go's time per token at T ≥ 4096 at most 0.5x PyTorch's (worst ratio where PyTorch ran): met by fast (0.25); missed by slow (0.80).",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("targets:\n%s\nwant a line containing %q", b.String(), want)
		}
	}
	b.Reset()
	v.summary(&b, "train")
	if want := "| slow | 0.900 | 1.200 | 0.75 | 0.80 | 3.600 | 480 | 4000 | 1.00 / 2.00 |"; !strings.Contains(b.String(), want) {
		t.Errorf("summary:\n%s\nwant the row %q", b.String(), want)
	}
	if want := "| fast | 0.300 | 1.200 | 0.25 | 0.25 | 1.200 | 400 | 4000 |"; !strings.Contains(b.String(), want) {
		t.Errorf("summary:\n%s\nwant the row %q", b.String(), want)
	}
}
