// Command bench times one training step of the reference model in Go and in
// PyTorch, side by side, for every position encoding, and prints a table of
// ms/step, tokens/s, the ratio Go/PyTorch and achieved GFLOP/s.
//
// Both sides train the same model (the reference model of
// testdata/golden/gen_golden.py: same parameters, shapes and encoding
// conventions) on the same batch geometry in float32; one step is batch
// sampling, forward, backward, global-norm clipping and AdamW. For each
// encoding the two sides alternate in rounds (so that the load of a shared
// machine hits both alike), Go at 1 and 2 threads, PyTorch at 1+1, 2+1 and
// 1+2 threads (ATen intra-op + OpenBLAS: 2+2 oversubscribes two cores);
// the step time is the median over the timed steps after warm-up, and the
// table reports, for each side, its best thread configuration. Before timing, -check verifies that both
// sides compute the same loss and gradient norm from the same weights and
// batch.
//
//	go run ./bench                 # full run (about 10 minutes); OpenBLAS if installed
//	RPE_BLAS=gonum go run ./bench  # gonum's pure-Go BLAS
//	go run ./bench -fast           # quick run: fewer steps, one round
//	go run ./bench -pos rope,alibi -steps 30 -rounds 3
//	go run -tags purego ./bench    # pure-Go BLAS
//	go run ./bench -eval           # evaluation at 8L: forward ms/token and peak RSS, Go vs PyTorch
//	go run ./bench -cost -preset quick  # time and memory over T at batch 1, fwd and train (bench/README.md)
//	go run ./bench -roofline -md   # calibrated GEMM peak, memory bandwidth, roofline of every kernel (roofline.go)
//
// The PyTorch side is bench/torch_bench.py run by Debian's /usr/bin/python3
// (python3-torch 1.13); -python names another interpreter, -go-only skips it.
//
// Every option of the training configuration is a flag, as for the train
// command (-batch, -seq-len, -d-model, -heads, -layers, -t5-max-distance,
// ...; -config reads a JSON configuration); -pos takes a comma-separated
// list, -steps is the number of timed steps and -warmup-steps the untimed
// ones before them. The PyTorch side implements the reference options only:
// other position or model options are refused unless -go-only.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

type options struct {
	steps, warmup, rounds int
	threads               []int
	pyThreads             []pyThreads
	pos                   []string
	python                string
	pyMalloc              string // "auto", "system" or a shared library preloaded into PyTorch
	goOnly, check, fast   bool
	markdown              bool
	shape                 Shape
	eval, evalChild       bool
	cost                  bool
	costOpts              costOptions
	decode                bool
	decodeCtx             []int
	roof                  rooflineOptions
}

// sample is the timed steps of one side, encoding and thread count.
type sample struct {
	times []float64
	loss  float64
}

// pyThreads is one thread configuration of the PyTorch side: ATen's
// intra-op threads and OpenBLAS's threads.
type pyThreads struct{ aten, blas int }

func (p pyThreads) String() string { return fmt.Sprintf("%d+%d", p.aten, p.blas) }

// result is one encoding's measurements: side ("go", "pytorch") -> thread
// configuration ("1t", "2t" for Go; "aten+blas" for PyTorch).
type result struct {
	pos   string
	flops float64
	runs  map[string]map[string]*sample
	check string
}

func main() { os.Exit(mainStatus(os.Args[1:], os.Stdout, os.Stderr)) }

// mainStatus runs the command and returns its exit status: 0 (also for -h),
// 2 for bad flags, 1 for a failed run. Errors are printed once, prefixed
// "bench: " once.
func mainStatus(args []string, stdout, stderr io.Writer) int {
	say := func(err error) { fmt.Fprintln(stderr, "bench: "+strings.TrimPrefix(err.Error(), "bench: ")) }
	o, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		say(err)
		return 2
	}
	run := run
	switch {
	case o.evalChild && o.costOpts.childMode == "train":
		run = func(o options, w io.Writer) error {
			return trainChild(w, o.shape, o.pos[0], o.threads, o.warmup, o.steps)
		}
	case o.evalChild:
		run = func(o options, w io.Writer) error {
			return evalChild(w, o.shape, o.pos[0], o.threads, o.warmup, o.steps)
		}
	case o.roof.on:
		o.roof.progress = stderr
		run = runRoofline
	case o.cost:
		run = runCost
	case o.decode:
		run = runDecode
	case o.eval:
		run = runEval
	}
	if err := run(o, stdout); err != nil {
		say(err)
		return 1
	}
	return 0
}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var o options
	var threads, pyth, pos string // pos: the -pos list
	base := benchBase()
	base.Steps = 20 // -steps: timed steps (updates, or passes with -eval)
	cf := trainer.BindFlags(fs, &base, posenc.PosLine)
	// The one default that differs from the training commands' (docs/encodings.md):
	// say so where it is printed.
	fs.Lookup("sinusoidal-scale").Usage = "amplitude of the sinusoidal table: bench's default 1 is the PyTorch reference's unit table " +
		"(the scale does not change the cost; the training commands' default is 1/√d-model)"
	fs.IntVar(&o.warmup, "warmup-steps", 3, "untimed steps before each timed block")
	fs.IntVar(&o.rounds, "rounds", 2, "rounds alternating Go and PyTorch")
	fs.StringVar(&threads, "threads", "1,2", "Go thread counts to try (the table reports each side's best)")
	fs.StringVar(&pyth, "pythreads", "1+1,2+1,1+2", "PyTorch thread configurations ATEN+BLAS to try (ATen intra-op threads + OpenBLAS threads)")
	fs.StringVar(&o.python, "python", "/usr/bin/python3", "Python interpreter with torch (Debian's python3-torch)")
	fs.BoolVar(&o.goOnly, "go-only", false, "time the Go side only")
	fs.StringVar(&o.pyMalloc, "py-malloc", "auto", "allocator of the PyTorch side: auto (tcmalloc if installed, as PyTorch's CPU tuning guide advises; else glibc), system, or a library path to LD_PRELOAD")
	fs.BoolVar(&o.check, "check", true, "check that both sides compute the same loss and gradient norm first")
	fs.BoolVar(&o.fast, "fast", false, "quick run: 5 steps, 1 warm-up step, 1 round")
	fs.BoolVar(&o.markdown, "md", false, "print the table as Markdown")
	fs.BoolVar(&o.eval, "eval", false, "benchmark evaluation instead of training: forward passes at 8L (default -batch 4 -seq-len 512), time and peak memory")
	fs.BoolVar(&o.evalChild, "eval-child", false, "internal: the Go side of -eval (and of a -cost cell) for one encoding")
	co := &o.costOpts
	var modes, seqs, redo string
	var memLimit float64
	fs.BoolVar(&o.cost, "cost", false, "time and memory cost of every encoding over T at batch 1, Go vs PyTorch (see bench/README.md)")
	fs.StringVar(&co.preset, "preset", "full", "-cost: full (every trainable line encoding, T 512..16384) or quick (rope, alibi, t5 at 512, 1024)")
	fs.StringVar(&modes, "modes", "fwd,train", "-cost: fwd (forward, no gradient) and/or train (forward + backward + AdamW step)")
	fs.StringVar(&seqs, "cost-seq", "", "-cost: lengths T to measure, comma-separated (with -cost, -seq is this flag; default: the preset's)")
	fs.StringVar(&co.stream, "cost-stream", "auto", "-cost: streaming attention on the Go side: auto (where the encoding supports it), true, false")
	fs.Float64Var(&memLimit, "mem-limit", 8, "-cost: GiB per measured process; a process above it is killed, a cell estimated above it is skipped")
	fs.StringVar(&co.out, "out", "", "-cost: output directory (default runs/cost/<preset>)")
	fs.StringVar(&redo, "redo", "", "-cost: encodings to measure again, comma-separated (the other finished cells are kept)")
	fs.BoolVar(&co.render, "render", false, "-cost: render the tables and the plot from results.json only")
	fs.StringVar(&co.childMode, "child-mode", "fwd", "internal: with -eval-child, fwd or train")
	var decodeCtx string
	fs.BoolVar(&o.decode, "decode", false, "benchmark decoding one token per step with a key/value cache at batch 1, Go (layers.Decoder) vs PyTorch (its own cache loop): ms/token per context (default -pos "+strings.Join(decodeEncodings, ",")+", -threads 2, -pythreads 2+1)")
	fs.StringVar(&decodeCtx, "decode-ctx", decodeContexts, "-decode: contexts (windows, the cache full), comma-separated")
	bindRooflineFlags(fs, &o.roof)
	if slices.Contains(args, "-cost") || slices.Contains(args, "--cost") || slices.Contains(args, "-cost=true") {
		args = costArgs(args)
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	cfg, err := cf.Resolve()
	if err != nil {
		return o, fmt.Errorf("bench: %v", err)
	}
	if cf.Dump() {
		return o, fmt.Errorf("bench: -dump-config is for the train and extrapolation commands")
	}
	o.steps = cfg.Steps
	pos = strings.Join(Encodings, ",") // -pos: comma-separated encodings, all by default
	if cf.Explicit("pos") {
		pos = cfg.Model.Pos
	}
	o.shape = shapeOf(cfg)
	if o.eval || o.evalChild {
		if !cf.Explicit("batch") {
			o.shape.Batch = EvalShape().Batch
		}
		if !cf.Explicit("seq-len") {
			o.shape.Seq = EvalShape().Seq
		}
	}
	if o.cost {
		if err := o.costFlags(cf, explicit, modes, seqs, redo, memLimit); err != nil {
			return o, err
		}
		modeDefaults(explicit, cf.Explicit("pos"), &threads, &pyth, &pos, costPresets[co.preset].pos)
	}
	if o.decode {
		if o.eval || o.cost || o.evalChild {
			return o, fmt.Errorf("bench: -decode is a mode of its own: not with -eval or -cost")
		}
		if o.decodeCtx, err = parseContexts(decodeCtx); err != nil {
			return o, err
		}
		modeDefaults(explicit, cf.Explicit("pos"), &threads, &pyth, &pos, decodeEncodings)
	}
	if err := o.rooflineFlags(explicit, cf.Explicit("pos"), &pos); err != nil {
		return o, err
	}
	if co.childMode != "fwd" && co.childMode != "train" {
		return o, fmt.Errorf("bench: -child-mode %q, want fwd or train", co.childMode)
	}
	if d := refOptions(cfg); len(d) > 0 && !o.goOnly && !o.evalChild {
		return o, fmt.Errorf("bench: the PyTorch side runs the reference options only, and these differ: %s; add -go-only to time the Go side alone",
			strings.Join(d, ", "))
	}
	if o.fast {
		o.steps, o.warmup, o.rounds = 5, 1, 1
	}
	for _, f := range strings.Split(threads, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return o, fmt.Errorf("bench: bad thread count %q", f)
		}
		o.threads = append(o.threads, n)
	}
	for _, f := range strings.Split(pyth, ",") {
		var p pyThreads
		if _, err := fmt.Sscanf(strings.TrimSpace(f), "%d+%d", &p.aten, &p.blas); err != nil || p.aten <= 0 || p.blas <= 0 {
			return o, fmt.Errorf("bench: bad PyTorch thread configuration %q (want ATEN+BLAS, e.g. 2+1)", f)
		}
		o.pyThreads = append(o.pyThreads, p)
	}
	for _, p := range strings.Split(pos, ",") {
		if p = strings.TrimSpace(p); p != "" {
			o.pos = append(o.pos, p)
		}
	}
	if o.steps <= 0 || o.rounds <= 0 || o.warmup < 0 || len(o.pos) == 0 {
		return o, fmt.Errorf("bench: need steps > 0, rounds > 0, warmup >= 0 and an encoding")
	}
	if err := cf.CheckApplies(o.pos); err != nil {
		return o, fmt.Errorf("bench: %v", err)
	}
	return o, nil
}

// modeDefaults sets the defaults of -cost and -decode for the flags not
// given: Go at 2 threads, PyTorch at 2+1, and the mode's encodings.
func modeDefaults(explicit map[string]bool, posGiven bool, threads, pyth, pos *string, encodings []string) {
	if !explicit["threads"] {
		*threads = "2"
	}
	if !explicit["pythreads"] {
		*pyth = "2+1"
	}
	if !posGiven {
		*pos = strings.Join(encodings, ",")
	}
}

// startPyUnless starts the PyTorch side unless -go-only (nil then).
func startPyUnless(o options) (*pyServer, error) {
	if o.goOnly {
		return nil, nil
	}
	return startPy(o)
}

func run(o options, w io.Writer) error {
	py, err := startPyUnless(o)
	if err != nil {
		return err
	}
	defer py.close()
	sh := o.shape
	fmt.Fprintf(w, "model: %d layers, d_model %d, %d heads, FFN %d, vocab %d; batch %d x %d tokens, float32\n",
		sh.Layers, sh.DModel, sh.Heads, sh.FFN, sh.Vocab, sh.Batch, sh.Seq)
	fmt.Fprintf(w, "Go: %s, %s, GOMAXPROCS %d, %d CPUs", runtime.Version(), graph.BLASName(), runtime.GOMAXPROCS(0), runtime.NumCPU())
	if py != nil {
		_, alloc, _ := pyAllocator(o.pyMalloc)
		fmt.Fprintf(w, "; PyTorch %s, %s, %s", py.Torch, py.BLAS, alloc)
	}
	fmt.Fprintf(w, "\nper side, encoding and thread configuration (Go: threads; PyTorch: ATen+OpenBLAS threads): %d rounds x (%d warm-up + %d timed steps); median step time\n\n",
		o.rounds, o.warmup, o.steps)
	maxProcs := runtime.GOMAXPROCS(0)
	defer setGoThreads(maxProcs)

	var results []*result
	for _, pos := range o.pos {
		r := &result{pos: pos, flops: StepFLOPs(sh, pos), runs: map[string]map[string]*sample{"go": {}, "pytorch": {}}}
		if o.check && py != nil {
			r.check = checkSame(sh, pos, py)
			fmt.Fprintf(w, "%-11s check: %s\n", pos, r.check)
		}
		gr, err := newGoRunner(sh, pos)
		if err != nil {
			return err
		}
		start := time.Now()
		for round := 0; round < o.rounds; round++ {
			goFirst := round%2 == 0
			for k := 0; k < 2; k++ {
				if (k == 0) == goFirst {
					for _, th := range o.threads {
						setGoThreads(th)
						times, loss, err := gr.time(o.warmup, o.steps)
						setGoThreads(maxProcs)
						if err != nil {
							gr.close()
							return fmt.Errorf("%s: Go: %w", pos, err)
						}
						add(r.runs["go"], fmt.Sprintf("%dt", th), times, loss)
					}
				} else if py != nil {
					for _, pt := range o.pyThreads {
						times, loss, err := py.time(sh, pos, pt, o.warmup, o.steps)
						if err != nil {
							gr.close()
							return fmt.Errorf("%s: %w", pos, err)
						}
						add(r.runs["pytorch"], pt.String(), times, loss)
					}
				}
			}
		}
		gr.close()
		results = append(results, r)
		fmt.Fprintf(w, "%-11s %s (%.0fs)\n", pos, r.summary(), time.Since(start).Seconds())
	}
	fmt.Fprintln(w)
	printTable(w, o, results)
	return nil
}

func add(m map[string]*sample, th string, times []float64, loss float64) {
	s := m[th]
	if s == nil {
		s = &sample{}
		m[th] = s
	}
	s.times = append(s.times, times...)
	s.loss = loss
}

// checkSame compares the loss and gradient norm of both sides for the same
// weights and batch.
func checkSame(sh Shape, pos string, py *pyServer) string {
	dir, err := os.MkdirTemp("", "rpe-bench")
	if err != nil {
		return "FAILED: " + err.Error()
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, pos+".safetensors")
	g, err := goCheck(sh, pos, file)
	if err != nil {
		return "FAILED (Go): " + err.Error()
	}
	p, err := py.check(sh, pos, file)
	if err != nil {
		return "FAILED (PyTorch): " + err.Error()
	}
	rel := func(a, b float64) float64 { return math.Abs(a-b) / math.Max(math.Abs(b), 1e-12) }
	status := "same model"
	if rel(g.Loss, p.Loss) > 1e-4 || rel(g.GradNorm, p.GradNorm) > 1e-3 {
		status = "MISMATCH"
	}
	return fmt.Sprintf("%s: loss Go %.6f PyTorch %.6f, grad norm Go %.5f PyTorch %.5f", status, g.Loss, p.Loss, g.GradNorm, p.GradNorm)
}

func median(x []float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// best returns the thread configuration with the lowest median step time
// and that median, in seconds ("" and +Inf if m is empty).
func best(m map[string]*sample) (string, float64) {
	th, t := "", math.Inf(1)
	for k, s := range m {
		if v := median(s.times); v < t || (v == t && k < th) {
			th, t = k, v
		}
	}
	return th, t
}

func (r *result) summary() string {
	var parts []string
	for _, side := range []string{"go", "pytorch"} {
		ths := make([]string, 0, len(r.runs[side]))
		for th := range r.runs[side] {
			ths = append(ths, th)
		}
		sort.Strings(ths)
		for _, th := range ths {
			parts = append(parts, fmt.Sprintf("%s %s %.1f ms", side, th, 1000*median(r.runs[side][th].times)))
		}
	}
	return strings.Join(parts, ", ")
}

func printTable(w io.Writer, o options, results []*result) {
	tokens := float64(o.shape.Tokens())
	head := []string{"encoding", "Go ms/step", "PyTorch ms/step", "Go/PyTorch", "Go tokens/s", "PyTorch tokens/s", "Go GFLOP/s", "PyTorch GFLOP/s"}
	var rows [][]string
	for _, r := range results {
		gth, gt := best(r.runs["go"])
		row := []string{r.pos, fmt.Sprintf("%.1f (%s)", 1000*gt, gth)}
		if pth, pt := best(r.runs["pytorch"]); pth != "" {
			row = append(row, fmt.Sprintf("%.1f (%s)", 1000*pt, pth), fmt.Sprintf("%.2f", gt/pt),
				fmt.Sprintf("%.0f", tokens/gt), fmt.Sprintf("%.0f", tokens/pt),
				fmt.Sprintf("%.1f", r.flops/gt/1e9), fmt.Sprintf("%.1f", r.flops/pt/1e9))
		} else {
			row = append(row, "-", "-", fmt.Sprintf("%.0f", tokens/gt), "-", fmt.Sprintf("%.1f", r.flops/gt/1e9), "-")
		}
		rows = append(rows, row)
	}
	writeTable(w, o.markdown, head, rows)
}
