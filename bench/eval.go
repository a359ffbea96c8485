package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
)

// This file is the evaluation benchmark (-eval): the forward pass of the
// reference model at 8L = 512 tokens, as the extrapolation study scores it
// (trainer.Evaluator: EvalTokens 2048, so 4 windows per pass), in Go and in
// PyTorch (torch.no_grad), each side in a fresh process per encoding so that
// the memory figures belong to that run alone.

// evalReport is what one side reports for one encoding (JSON, both sides).
type evalReport struct {
	// Times maps a thread configuration to the pass times in seconds.
	Times map[string][]float64 `json:"times"`
	// BaseRSS is the process RSS before the model is built, PeakRSS the
	// peak RSS (VmHWM) from then to the end, both in bytes.
	BaseRSS uint64  `json:"base_rss"`
	PeakRSS uint64  `json:"peak_rss"`
	Loss    float64 `json:"loss"`
	Error   string  `json:"error,omitempty"`
}

// evalChild is the Go side, run as `bench -eval-child`: it builds the
// evaluator of pos for sh (Batch windows of Seq tokens) on random weights,
// then for each thread count runs warmup untimed and passes timed forward
// passes over random bytes, and writes an evalReport to w.
func evalChild(w io.Writer, sh Shape, pos string, threads []int, warmup, passes int) error {
	return measureChild(w, threads, warmup, passes, func() (func() (float64, error), func(), error) {
		c := sh.config(pos)
		p := graph.NewParams(c.Dtype, c.Seed)
		ev, err := trainer.NewEvaluator(p, c.Model, sh.Batch, sh.Seq)
		if err != nil {
			return nil, nil, err
		}
		rng := rand.New(rand.NewSource(7))
		data := make([]byte, sh.Batch*sh.Seq+1)
		for i := range data {
			data[i] = byte(rng.Intn(256))
		}
		pass := func() (float64, error) {
			res, err := ev.Eval(data, 0, 0)
			return res.Nats, err
		}
		return pass, func() { ev.Close() }, nil
	})
}

// trainChild is the Go side of a training cell of -cost (`bench -eval-child
// -child-mode train`): each pass is one training step of the trainer of pos
// for sh (forward, backward, clipping, AdamW) on a random corpus; it writes
// an evalReport to w as evalChild does.
func trainChild(w io.Writer, sh Shape, pos string, threads []int, warmup, passes int) error {
	return measureChild(w, threads, warmup, passes, func() (func() (float64, error), func(), error) {
		// The trainer keeps the last 10% of the corpus for validation,
		// which must hold a window.
		r, err := newGoRunnerCorpus(sh, pos, max(1<<16, 16*(sh.Seq+1)))
		if err != nil {
			return nil, nil, err
		}
		pass := func() (float64, error) {
			res, err := r.tr.TrainStep()
			return res.Loss, err
		}
		return pass, r.close, nil
	})
}

// measureChild measures one side's process for one encoding: it records
// the RSS, resets the peak RSS, calls build (which returns one pass, and a
// function releasing what build made), then for each thread count runs
// warmup untimed and passes timed passes, and writes an evalReport (pass
// times per "<n>t", the RSS before build, the peak RSS, the last pass's
// loss) to w.
func measureChild(w io.Writer, threads []int, warmup, passes int, build func() (pass func() (float64, error), release func(), err error)) error {
	rep := evalReport{Times: map[string][]float64{}}
	debug.FreeOSMemory()
	rep.BaseRSS, _ = study.ProcStatus("VmRSS")
	// Reset VmHWM to the current RSS (Linux >= 4.0); the peak then covers
	// the model, the graph and the passes.
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)

	pass, release, err := build()
	if err != nil {
		return err
	}
	defer release()
	maxProcs := runtime.GOMAXPROCS(0)
	defer setGoThreads(maxProcs)
	for _, th := range threads {
		setGoThreads(th)
		for i := 0; i < warmup+passes; i++ {
			t0 := time.Now()
			loss, err := pass()
			if err != nil {
				return err
			}
			if i >= warmup {
				key := fmt.Sprintf("%dt", th)
				rep.Times[key] = append(rep.Times[key], time.Since(t0).Seconds())
			}
			rep.Loss = loss
		}
	}
	rep.PeakRSS, _ = study.ProcStatus("VmHWM")
	return json.NewEncoder(w).Encode(rep)
}

// runEvalSide runs one side's process for one encoding and decodes its
// report (the last line of its output).
func runEvalSide(cmd *exec.Cmd) (evalReport, error) {
	var rep evalReport
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return rep, errors.Wrapf(err, "%s", strings.Join(cmd.Args, " "))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
		return rep, errors.Wrapf(err, "%s: reading its report %q", strings.Join(cmd.Args, " "), lines[len(lines)-1])
	}
	if rep.Error != "" {
		return rep, errors.New(rep.Error)
	}
	return rep, nil
}

// bestTime returns the thread configuration with the lowest median pass
// time and that median.
func bestTime(times map[string][]float64) (string, float64) {
	keys := make([]string, 0, len(times))
	for k := range times {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	bk, bt := "", 0.0
	for _, k := range keys {
		if m := median(times[k]); bk == "" || m < bt {
			bk, bt = k, m
		}
	}
	return bk, bt
}

// runEval is the -eval mode: for every encoding a Go child and a PyTorch
// process, then a table of ms per token (best thread configuration of each
// side), the ratio, and peak memory.
func runEval(o options, w io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	sh := o.shape
	fmt.Fprintf(w, "evaluation: forward pass of %d windows x %d tokens (no gradient), model %d layers, d_model %d, %d heads, FFN %d, float32\n",
		sh.Batch, sh.Seq, sh.Layers, sh.DModel, sh.Heads, sh.FFN)
	fmt.Fprintf(w, "Go: %s, %s; each side in a fresh process per encoding, %d warm-up + %d timed passes per thread configuration; median pass time\n\n",
		runtime.Version(), graph.BLASName(), o.warmup, o.steps)
	// The child process runs this process's configuration.
	cfgFile, err := writeConfig(sh.Base)
	if err != nil {
		return err
	}
	defer os.Remove(cfgFile)
	threads := make([]string, len(o.threads))
	for i, t := range o.threads {
		threads[i] = strconv.Itoa(t)
	}
	type row struct {
		pos    string
		gp, pp evalReport
	}
	var rows []row
	for _, pos := range o.pos {
		args := []string{"-eval-child", "-config", cfgFile, "-pos", pos, "-threads", strings.Join(threads, ","),
			"-batch", strconv.Itoa(sh.Batch), "-seq-len", strconv.Itoa(sh.Seq),
			"-warmup-steps", strconv.Itoa(o.warmup), "-steps", strconv.Itoa(o.steps)}
		gp, err := runEvalSide(exec.Command(self, args...))
		if err != nil {
			return errors.WithMessagef(err, "%s: Go side", pos)
		}
		r := row{pos: pos, gp: gp}
		if !o.goOnly {
			var pyth []string
			for _, pt := range o.pyThreads {
				pyth = append(pyth, pt.String())
			}
			cmd, err := pyCommand(o, scriptPath(), "--eval", "--pos", pos,
				"--B", strconv.Itoa(sh.Batch), "--T", strconv.Itoa(sh.Seq), "--threads-list", strings.Join(pyth, ","),
				"--warmup", strconv.Itoa(o.warmup), "--steps", strconv.Itoa(o.steps))
			if err != nil {
				return err
			}
			pp, err := runEvalSide(cmd)
			if err != nil {
				return errors.WithMessagef(err, "%s: PyTorch side", pos)
			}
			r.pp = pp
		}
		gk, gt := bestTime(gp.Times)
		fmt.Fprintf(w, "%-11s Go %.1f ms/pass (%s), peak RSS %.0f MiB", pos, 1e3*gt, gk, mib(gp.PeakRSS))
		if !o.goOnly {
			pk, pt := bestTime(r.pp.Times)
			fmt.Fprintf(w, "; PyTorch %.1f ms/pass (%s), peak RSS %.0f MiB", 1e3*pt, pk, mib(r.pp.PeakRSS))
		}
		fmt.Fprintln(w)
		rows = append(rows, r)
	}
	fmt.Fprintln(w)
	tok := float64(sh.Tokens())
	head := []string{"encoding", "Go ms/token", "PyTorch ms/token", "Go/PyTorch",
		"Go peak RSS MiB (+eval)", "PyTorch peak RSS MiB (+eval)", "Go/PyTorch (+eval)"}
	var lines [][]string
	for _, r := range rows {
		gk, gt := bestTime(r.gp.Times)
		l := []string{r.pos, fmt.Sprintf("%.4f (%s)", 1e3*gt/tok, gk), "-", "-",
			fmt.Sprintf("%.0f (+%.0f)", mib(r.gp.PeakRSS), mib(r.gp.PeakRSS-r.gp.BaseRSS)), "-", "-"}
		if !o.goOnly {
			pk, pt := bestTime(r.pp.Times)
			l[2] = fmt.Sprintf("%.4f (%s)", 1e3*pt/tok, pk)
			l[3] = fmt.Sprintf("%.2f", gt/pt)
			l[5] = fmt.Sprintf("%.0f (+%.0f)", mib(r.pp.PeakRSS), mib(r.pp.PeakRSS-r.pp.BaseRSS))
			l[6] = fmt.Sprintf("%.2f", float64(r.gp.PeakRSS-r.gp.BaseRSS)/float64(r.pp.PeakRSS-r.pp.BaseRSS))
		}
		lines = append(lines, l)
	}
	writeTable(w, o.markdown, head, lines)
	fmt.Fprintln(w, "\n+eval: peak RSS minus the process's RSS before the model was built (the runtime, and for PyTorch the torch libraries, excluded).")
	return nil
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// writeTable prints a table as Markdown or aligned text.
func writeTable(w io.Writer, markdown bool, head []string, rows [][]string) {
	if markdown {
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat(" --- |", len(head)))
		for _, r := range rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	tw.Flush()
}

// writeConfig writes c as a JSON configuration (the -config format) to a
// temporary file and returns its path.
func writeConfig(c trainer.Config) (string, error) {
	f, err := os.CreateTemp("", "rpe-bench-*.json")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := trainer.DumpJSON(f, c); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}
