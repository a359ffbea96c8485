package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// This file is the cost benchmark (-cost, issue #17): for every encoding,
// mode (fwd: a forward pass without gradient; train: one training step,
// forward + backward + clipping + AdamW) and sequence length T at batch 1,
// the time per token and the added peak RSS of a fresh Go process and of a
// fresh PyTorch process, each watched so that a process above -mem-limit is
// killed. Cells are kept in results.json as they finish, so that a run
// resumes where it stopped; cost_report.go renders the tables and the plot.

// costOptions are the options of -cost.
type costOptions struct {
	preset    string
	modes     []string
	seqs      []int
	stream    string  // auto, true, false
	memLimit  float64 // GiB
	out       string
	redo      []string
	render    bool
	warmup    int // < 0: costPasses
	steps     int // < 0: costPasses
	childMode string
}

// costPreset is the encodings and lengths of a preset.
type costPreset struct {
	pos  []string
	seqs []int
}

var costPresets = map[string]costPreset{
	"full":  {Encodings, []int{512, 1024, 2048, 4096, 8192, 16384}},
	"quick": {[]string{"rope", "alibi", "t5"}, []int{512, 1024}},
}

// costModes are the valid -modes, in table order.
var costModes = []string{"fwd", "train"}

// costPasses returns the untimed and timed passes of a cell at length t:
// 1 warm-up, then 3 timed passes up to 1024, 2 up to 4096, 1 from 8192.
func costPasses(t int) (warmup, passes int) {
	switch {
	case t <= 1024:
		return 1, 3
	case t <= 4096:
		return 1, 2
	}
	return 1, 1
}

// Cell statuses.
const (
	cellOK        = "ok"
	cellOverLimit = "over limit" // killed by the watchdog
	cellSkipped   = "skipped"    // estimated above the limit, not run
	cellNA        = "n/a"        // the side cannot run this encoding
	cellError     = "error"      // the process failed
)

// costCell is one measurement: an encoding, a side, a mode and a length.
type costCell struct {
	Pos  string `json:"pos"`
	Side string `json:"side"` // "go" or "pytorch"
	Mode string `json:"mode"` // "fwd" or "train"
	T    int    `json:"T"`
	// Status is ok, over limit, skipped, n/a or error; Reason says why
	// for all but ok.
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Stream (Go side) is whether the attention streamed
	// (graph.StreamAttention) or materialised [B, H, T, T].
	Stream bool `json:"stream"`
	// Threads is the best thread configuration ("2t"; PyTorch "2+1"),
	// Times its timed passes in seconds after Warmup untimed ones.
	Threads string    `json:"threads,omitempty"`
	Warmup  int       `json:"warmup"`
	Times   []float64 `json:"times,omitempty"`
	// MsPerToken is the median pass time per token in ms.
	MsPerToken float64 `json:"ms_per_token,omitempty"`
	// BaseRSS is the RSS before the model is built, PeakRSS the peak RSS
	// from then on (for an over-limit cell: the last RSS the watchdog
	// saw), in bytes; AddedMiB = (PeakRSS - BaseRSS) / 2^20.
	BaseRSS  uint64  `json:"base_rss,omitempty"`
	PeakRSS  uint64  `json:"peak_rss,omitempty"`
	AddedMiB float64 `json:"added_mib,omitempty"`
	Loss     float64 `json:"loss,omitempty"`
	// LimitGiB is the -mem-limit the cell ran (or was skipped) under,
	// Seconds its wall time, When its end (RFC 3339).
	LimitGiB float64 `json:"limit_gib"`
	Seconds  float64 `json:"seconds"`
	When     string  `json:"when,omitempty"`
}

func (c *costCell) key() string { return fmt.Sprintf("%s/%s/%s/%d", c.Pos, c.Side, c.Mode, c.T) }

// finished reports whether c need not run again under a limit of limit
// GiB: ok and n/a cells are kept, an over-limit cell is kept unless the
// limit has grown, a skipped or failed cell is run again.
func (c *costCell) finished(limit float64) bool {
	switch c.Status {
	case cellOK, cellNA:
		return true
	case cellOverLimit:
		return c.LimitGiB >= limit
	}
	return false
}

// costResults is results.json.
type costResults struct {
	// Setup describes what the cells measured; a run refuses a
	// results.json of another setup.
	Setup string `json:"setup"`
	// Go, BLAS and Torch describe the software of the last run.
	Go    string      `json:"go"`
	BLAS  string      `json:"blas"`
	Torch string      `json:"torch,omitempty"`
	Cells []*costCell `json:"cells"`
}

func (r *costResults) find(pos, side, mode string, t int) *costCell {
	for _, c := range r.Cells {
		if c.Pos == pos && c.Side == side && c.Mode == mode && c.T == t {
			return c
		}
	}
	return nil
}

// put replaces the cell of c's key, or appends c.
func (r *costResults) put(c *costCell) {
	for i, old := range r.Cells {
		if old.key() == c.key() {
			r.Cells[i] = c
			return
		}
	}
	r.Cells = append(r.Cells, c)
}

// readCostResults reads dir/results.json; a missing file is an empty set.
func readCostResults(dir string) (*costResults, error) {
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if os.IsNotExist(err) {
		return &costResults{}, nil
	}
	if err != nil {
		return nil, err
	}
	var r costResults
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, errors.Wrapf(err, "cost: reading %s", filepath.Join(dir, "results.json"))
	}
	return &r, nil
}

// write saves r to dir/results.json atomically (a new file renamed over).
func (r *costResults) write(dir string) error {
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "results.json.tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "results.json"))
}

// costSetup describes the configuration the cells measure: the model, the
// batch, the -cost-stream choice and the options that differ from the
// reference.
func costSetup(o options) string {
	sh := o.shape
	s := fmt.Sprintf("model %d layers, d_model %d, %d heads, FFN %d, vocab %d; batch %d; float32; cost-stream %s",
		sh.Layers, sh.DModel, sh.Heads, sh.FFN, sh.Vocab, sh.Batch, o.costOpts.stream)
	if d := refOptions(sh.Base); len(d) > 0 {
		s += "; options " + strings.Join(d, ", ")
	}
	if _, alloc, err := pyAllocator(o.pyMalloc); err == nil {
		s += "; PyTorch allocator " + alloc
	}
	return s
}

// streamable returns nil if the Go model of pos streams its attention
// (layers.Config.Stream), else the error that refuses it: a tiny model of
// sh's configuration is built with Stream on.
func streamable(sh Shape, pos string) error {
	s := sh
	s.Batch, s.Seq = 1, 8
	c := s.config(pos)
	c.Model.Stream = true
	g := G.NewGraph()
	p := graph.NewParams(c.Dtype, c.Seed)
	defer p.Forget(g)
	lm, err := layers.NewLM(g, p, c.Model)
	if err != nil {
		return err
	}
	ids := G.NewMatrix(g, tensor.Int, G.WithShape(1, 8), G.WithName("ids"),
		G.WithValue(tensor.New(tensor.WithShape(1, 8), tensor.WithBacking(make([]int, 8)))))
	_, err = lm.Fwd(ids)
	return err
}

// pyEncodings asks torch_bench.py for the encodings it implements.
func pyEncodings(python string) ([]string, error) {
	out, err := exec.Command(python, scriptPath(), "--encodings").Output()
	if err != nil {
		return nil, errors.Wrapf(err, "cost: %s %s --encodings (Debian's python3 with python3-torch; or -go-only)", python, scriptPath())
	}
	var names []string
	if err := json.Unmarshal(bytes.TrimSpace(out), &names); err != nil {
		return nil, errors.Wrapf(err, "cost: reading the encodings of torch_bench.py from %q", out)
	}
	return names, nil
}

// estimatePeak estimates the peak RSS of the cell (pos, side, mode, t)
// from the ok cells of the same series at smaller lengths: the added
// memory of the largest one scaled by (t/T)^k, k the log-log slope between
// the two largest (at least 1; 2 with one cell), plus its base RSS. It
// returns 0 without such a cell, and the reason to skip when a smaller
// length of the series went over the limit.
func estimatePeak(r *costResults, pos, side, mode string, t int) (est float64, over string) {
	var pts []*costCell
	for _, c := range r.Cells {
		if c.Pos != pos || c.Side != side || c.Mode != mode || c.T >= t {
			continue
		}
		if c.Status == cellOverLimit {
			return 0, fmt.Sprintf("T = %d was over the limit", c.T)
		}
		if c.Status == cellOK && c.PeakRSS > c.BaseRSS {
			pts = append(pts, c)
		}
	}
	if len(pts) == 0 {
		return 0, ""
	}
	slices.SortFunc(pts, func(a, b *costCell) int { return a.T - b.T })
	last := pts[len(pts)-1]
	added := float64(last.PeakRSS - last.BaseRSS)
	k := 2.0
	if len(pts) >= 2 {
		prev := pts[len(pts)-2]
		k = math.Log(added/float64(prev.PeakRSS-prev.BaseRSS)) / math.Log(float64(last.T)/float64(prev.T))
		k = math.Max(k, 1)
	}
	return float64(last.BaseRSS) + added*math.Pow(float64(t)/float64(last.T), k), ""
}

// costPlan is one cell to decide, in run order.
type costPlan struct {
	pos, side, mode string
	t               int
}

// weight is the plan's share of the run time for the ETA: the passes times
// T·(1 + T/1024) (the linear and the quadratic parts), 3x for training.
func (p costPlan) weight(o options) float64 {
	w, n := costPasses(p.t)
	if o.costOpts.warmup >= 0 {
		w = o.costOpts.warmup
	}
	if o.costOpts.steps >= 0 {
		n = o.costOpts.steps
	}
	f := float64(w+n) * float64(p.t) * (1 + float64(p.t)/1024)
	if p.mode == "train" {
		f *= 3
	}
	return f
}

// runCost is the -cost mode: it runs (or, with -render, only renders)
// every cell of the preset that results.json does not hold yet.
func runCost(o options, w io.Writer) error {
	co := o.costOpts
	if err := os.MkdirAll(co.out, 0o755); err != nil {
		return err
	}
	res, err := readCostResults(co.out)
	if err != nil {
		return err
	}
	if co.render {
		if len(res.Cells) == 0 {
			return errors.Errorf("cost: -render: no results in %s", co.out)
		}
		return renderCost(res, co.out, w)
	}
	setup := costSetup(o)
	if res.Setup != "" && res.Setup != setup {
		return errors.Errorf("cost: %s/results.json was measured with another setup (%s); this run is %s: use another -out, or remove the file",
			co.out, res.Setup, setup)
	}
	res.Setup, res.Go, res.BLAS = setup, runtime.Version(), graph.BLASName()
	var kept []*costCell
	for _, c := range res.Cells {
		if !slices.Contains(co.redo, c.Pos) {
			kept = append(kept, c)
		}
	}
	res.Cells = kept

	var pyNames []string
	if !o.goOnly {
		if pyNames, err = pyEncodings(o.python); err != nil {
			return err
		}
		if v, err := exec.Command(o.python, "-c", "import torch; print(torch.__version__)").Output(); err == nil {
			res.Torch = strings.TrimSpace(string(v))
		}
		_, alloc, err := pyAllocator(o.pyMalloc)
		if err != nil {
			return err
		}
		res.Torch += " with " + alloc
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cfgFile, err := writeConfig(o.shape.Base)
	if err != nil {
		return err
	}
	defer os.Remove(cfgFile)

	sides := []string{"go"}
	if !o.goOnly {
		sides = append(sides, "pytorch")
	}
	var plan []costPlan
	for _, pos := range o.pos {
		for _, mode := range co.modes {
			for _, t := range co.seqs {
				for _, side := range sides {
					plan = append(plan, costPlan{pos, side, mode, t})
				}
			}
		}
	}
	total := 0.0
	for _, p := range plan {
		total += p.weight(o)
	}
	limit := uint64(co.memLimit * (1 << 30))
	streams := map[string]bool{}
	streamWhy := map[string]string{}
	for _, pos := range o.pos {
		err := streamable(o.shape, pos)
		streams[pos] = co.stream == "true" || co.stream == "auto" && err == nil
		if err != nil {
			streamWhy[pos] = err.Error()
		}
	}
	fmt.Fprintf(w, "cost: %d cells (%s) into %s; memory limit %.1f GiB per process\n", len(plan), setup, co.out, co.memLimit)
	start := time.Now()
	done, ran := 0.0, 0.0
	for i, p := range plan {
		wt := p.weight(o)
		if c := res.find(p.pos, p.side, p.mode, p.t); c != nil && c.finished(co.memLimit) {
			total -= wt
			fmt.Fprintf(os.Stderr, "cost [%d/%d] %s %s %s T=%d: kept (%s)\n", i+1, len(plan), p.pos, p.side, p.mode, p.t, c.Status)
			continue
		}
		c := &costCell{Pos: p.pos, Side: p.side, Mode: p.mode, T: p.t, LimitGiB: co.memLimit}
		t0 := time.Now()
		switch {
		case p.side == "pytorch" && !slices.Contains(pyNames, p.pos):
			c.Status, c.Reason = cellNA, "torch_bench.py does not implement "+p.pos
		case p.side == "go" && co.stream == "true" && streamWhy[p.pos] != "":
			c.Status, c.Reason = cellNA, "-cost-stream true: "+streamWhy[p.pos]
		default:
			c.Stream = p.side == "go" && streams[p.pos]
			if est, over := estimatePeak(res, p.pos, p.side, p.mode, p.t); over != "" {
				c.Status, c.Reason = cellSkipped, over
			} else if est > float64(limit) {
				c.Status, c.Reason = cellSkipped, fmt.Sprintf("estimated peak RSS %.3g GiB (from the smaller T) > -mem-limit %.3g GiB", est/(1<<30), co.memLimit)
			} else {
				runCell(o, self, cfgFile, c, limit)
				ran += wt
			}
		}
		c.Seconds, c.When = time.Since(t0).Seconds(), time.Now().UTC().Format(time.RFC3339)
		res.put(c)
		if err := res.write(co.out); err != nil {
			return err
		}
		done += wt
		eta := "?"
		if ran > 0 && done < total {
			eta = (time.Duration(time.Since(start).Seconds()/ran*(total-done)) * time.Second).Round(time.Second).String()
		} else if done >= total {
			eta = "0s"
		}
		fmt.Fprintf(os.Stderr, "cost [%d/%d] %s %s %s T=%d: %s (%.0fs); ETA %s\n", i+1, len(plan), p.pos, p.side, p.mode, p.t, c.summary(), c.Seconds, eta)
	}
	fmt.Fprintf(w, "cost: done in %s\n", time.Since(start).Round(time.Second))
	return renderCost(res, co.out, w)
}

// summary is the cell's progress line.
func (c *costCell) summary() string {
	if c.Status != cellOK {
		return c.Status + ": " + c.Reason
	}
	s := fmt.Sprintf("%.4f ms/token, +%.0f MiB (%s)", c.MsPerToken, c.AddedMiB, c.Threads)
	if c.Side == "go" {
		s += map[bool]string{true: ", stream", false: ", materialised"}[c.Stream]
	}
	return s
}

// runCell runs c's process under the watchdog and fills c.
func runCell(o options, self, cfgFile string, c *costCell, limit uint64) {
	warmup, passes := costPasses(c.T)
	if o.costOpts.warmup >= 0 {
		warmup = o.costOpts.warmup
	}
	if o.costOpts.steps >= 0 {
		passes = o.costOpts.steps
	}
	c.Warmup = warmup
	var cmd *exec.Cmd
	if c.Side == "go" {
		threads := make([]string, len(o.threads))
		for i, t := range o.threads {
			threads[i] = strconv.Itoa(t)
		}
		cmd = exec.Command(self, "-eval-child", "-child-mode", c.Mode, "-config", cfgFile,
			"-stream="+strconv.FormatBool(c.Stream), "-pos", c.Pos, "-threads", strings.Join(threads, ","),
			"-batch", strconv.Itoa(o.shape.Batch), "-seq-len", strconv.Itoa(c.T),
			"-warmup-steps", strconv.Itoa(warmup), "-steps", strconv.Itoa(passes))
	} else {
		var pyth []string
		for _, pt := range o.pyThreads {
			pyth = append(pyth, pt.String())
		}
		var err error
		if cmd, err = pyCommand(o, scriptPath(), "--eval", "--mode", c.Mode, "--pos", c.Pos,
			"--B", strconv.Itoa(o.shape.Batch), "--T", strconv.Itoa(c.T), "--threads-list", strings.Join(pyth, ","),
			"--warmup", strconv.Itoa(warmup), "--steps", strconv.Itoa(passes)); err != nil {
			c.Status, c.Reason = cellError, err.Error()
			return
		}
	}
	rep, seen, killed, err := runWatched(cmd, limit)
	switch {
	case killed:
		c.Status = cellOverLimit
		c.Reason = fmt.Sprintf("killed at RSS %.3g GiB > -mem-limit %.3g GiB", float64(seen)/(1<<30), o.costOpts.memLimit)
		c.PeakRSS = seen
		return
	case err == nil && max(seen, rep.PeakRSS) > limit: // ended before the watchdog could kill it
		c.Status = cellOverLimit
		c.Reason = fmt.Sprintf("peak RSS %.3g GiB > -mem-limit %.3g GiB", float64(max(seen, rep.PeakRSS))/(1<<30), o.costOpts.memLimit)
		c.PeakRSS = max(seen, rep.PeakRSS)
		return
	case err != nil:
		c.Status, c.Reason = cellError, err.Error()
		return
	}
	th, best := bestTime(rep.Times)
	c.Status, c.Threads, c.Times = cellOK, th, rep.Times[th]
	c.MsPerToken = 1e3 * best / float64(o.shape.Batch*c.T)
	c.BaseRSS, c.PeakRSS, c.Loss = rep.BaseRSS, rep.PeakRSS, rep.Loss
	if rep.PeakRSS > rep.BaseRSS {
		c.AddedMiB = mib(rep.PeakRSS - rep.BaseRSS)
	}
}

// watchInterval is how often the watchdog reads a child's RSS.
const watchInterval = 20 * time.Millisecond

// runWatched runs cmd, reading its RSS every watchInterval and killing it
// when the RSS exceeds limit bytes (limit 0: no limit); it returns the
// report of its last output line, the largest RSS seen, and whether it
// killed the process (then there is no report and no error).
func runWatched(cmd *exec.Cmd, limit uint64) (rep evalReport, seen uint64, killed bool, err error) {
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, io.MultiWriter(os.Stderr, &stderr)
	if err := cmd.Start(); err != nil {
		return rep, 0, false, errors.Wrapf(err, "starting %s", cmd.Path)
	}
	var rss atomic.Uint64
	var kill atomic.Bool
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		pid := strconv.Itoa(cmd.Process.Pid)
		tick := time.NewTicker(watchInterval)
		defer tick.Stop()
		for {
			if r, ok := study.ProcStatusOf(pid, "VmRSS"); ok && r > rss.Load() {
				rss.Store(r)
				if limit > 0 && r > limit {
					kill.Store(true)
					cmd.Process.Kill()
					return
				}
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	err = cmd.Wait()
	close(stop)
	<-watched
	seen = rss.Load()
	if kill.Load() {
		return rep, seen, true, nil
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return rep, seen, false, errors.Errorf("%s (%v)", strings.TrimPrefix(msg, "bench: "), err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
		return rep, seen, false, errors.Wrapf(err, "%s: reading its report %q", strings.Join(cmd.Args, " "), lines[len(lines)-1])
	}
	if rep.Error != "" {
		return rep, seen, false, errors.New(rep.Error)
	}
	return rep, seen, false, nil
}

// costArgs rewrites -seq (the trainer's alias of -seq-len) to -cost-seq,
// so that with -cost, -seq 4096,8192 lists the lengths to measure.
func costArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		for _, p := range []string{"-seq", "--seq"} {
			if a == p {
				out[i] = "-cost-seq"
			} else if v, ok := strings.CutPrefix(a, p+"="); ok {
				out[i] = "-cost-seq=" + v
			}
		}
		if a == "--" {
			copy(out[i:], args[i:])
			break
		}
	}
	return out
}

// costFlags resolves the -cost options into o.costOpts and the batch
// (1 unless -batch is given).
func (o *options) costFlags(cf interface{ Explicit(string) bool }, explicit map[string]bool, modes, seqs, redo string, memLimit float64) error {
	co := &o.costOpts
	pr, ok := costPresets[co.preset]
	if !ok {
		return errors.Errorf("bench: -preset %q, want full or quick", co.preset)
	}
	if cf.Explicit("seq-len") {
		return errors.New("bench: -cost measures the lengths of -seq (a list) or of the preset, not -seq-len")
	}
	if cf.Explicit("stream") {
		return errors.New("bench: with -cost, -cost-stream auto|true|false chooses the streaming attention, not -stream")
	}
	if !cf.Explicit("batch") {
		o.shape.Batch = 1
	}
	co.modes = nil
	for _, m := range strings.Split(modes, ",") {
		m = strings.TrimSpace(m)
		if !slices.Contains(costModes, m) {
			return errors.Errorf("bench: -modes: %q is not a mode (valid: %s)", m, strings.Join(costModes, ", "))
		}
		if !slices.Contains(co.modes, m) {
			co.modes = append(co.modes, m)
		}
	}
	co.seqs = pr.seqs
	if seqs != "" {
		co.seqs = nil
		for _, f := range strings.Split(seqs, ",") {
			t, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || t <= 0 {
				return errors.Errorf("bench: -seq: bad length %q", f)
			}
			co.seqs = append(co.seqs, t)
		}
		slices.Sort(co.seqs)
		co.seqs = slices.Compact(co.seqs)
	}
	if co.stream != "auto" && co.stream != "true" && co.stream != "false" {
		return errors.Errorf("bench: -cost-stream %q, want auto, true or false", co.stream)
	}
	if !(memLimit > 0) {
		return errors.Errorf("bench: -mem-limit %v GiB must be positive", memLimit)
	}
	co.memLimit = memLimit
	if co.out == "" {
		co.out = filepath.Join("runs", "cost", co.preset)
	}
	for _, p := range strings.Split(redo, ",") {
		if p = strings.TrimSpace(p); p != "" {
			co.redo = append(co.redo, p)
		}
	}
	co.warmup, co.steps = -1, -1
	if explicit["warmup-steps"] {
		co.warmup = o.warmup
	}
	if cf.Explicit("steps") {
		co.steps = o.steps
	}
	return nil
}
