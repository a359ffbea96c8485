package main

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/errors"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// The decode mode (-decode) times generation one token per step against a
// key/value cache: Go's layers.Decoder and the PyTorch loop of
// torch_bench.py's Decoder (its own cache of every block's keys and values,
// the same work per step), batch 1, at each context of -decode-ctx, the
// cache full (a sliding window of ctx tokens: every timed step attends to
// ctx keys).

// decodeEncodings are the encodings of -decode unless -pos says otherwise
// (the ones torch_bench.py's Decoder implements).
var decodeEncodings = []string{"none", "rope", "alibi", "t5", "xl"}

// decodeContexts is the default of -decode-ctx.
const decodeContexts = "512,2048,8192"

// parseContexts parses -decode-ctx: positive window sizes of at least 2.
func parseContexts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 2 {
			return nil, fmt.Errorf("bench: -decode-ctx: bad context %q (want integers >= 2)", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// decodeCell is one (context, encoding): the best median step time of each
// side in seconds (NaN if not measured) and its thread configuration.
type decodeCell struct {
	ctx        int
	pos        string
	goT, pyT   float64
	goTh, pyTh string
	goFill     float64 // seconds to fill the Go cache by stepping
}

// goDecodeTimes builds a decoder of window ctx for pos, fills its cache by
// stepping ctx-1 tokens, then times steps single-token steps after warmup
// ones for each thread count: the step times in seconds per thread count,
// and the fill time.
func goDecodeTimes(sh Shape, pos string, ctx int, threads []int, warmup, steps int) (map[string][]float64, float64, error) {
	cfg := sh.config(pos).Model
	p := graph.NewParams(tensor.Float32, 1)
	dec, err := layers.NewDecoder(p, cfg, 1, ctx, 0)
	if err != nil {
		return nil, 0, err
	}
	defer dec.Close()
	step := func(i int) error {
		_, err := dec.Step([]int{i % cfg.Vocab})
		return err
	}
	maxProcs := runtime.GOMAXPROCS(0)
	defer setGoThreads(maxProcs)
	setGoThreads(threads[len(threads)-1])
	t0 := time.Now()
	for i := 0; i < ctx-1; i++ {
		if err := step(i); err != nil {
			return nil, 0, err
		}
	}
	fill := time.Since(t0).Seconds()
	out := map[string][]float64{}
	for _, th := range threads {
		setGoThreads(th)
		runtime.GC()
		for i := 0; i < warmup; i++ {
			if err := step(i); err != nil {
				return nil, 0, err
			}
		}
		key := fmt.Sprintf("%dt", th)
		for i := 0; i < steps; i++ {
			t := time.Now()
			if err := step(i); err != nil {
				return nil, 0, err
			}
			out[key] = append(out[key], time.Since(t).Seconds())
		}
	}
	return out, fill, nil
}

// decode asks the PyTorch side for the step times of one cell.
func (s *pyServer) decode(sh Shape, pos string, ctx int, ths []pyThreads, warmup, steps int) (map[string][]float64, error) {
	req := s.request("decode", sh, pos)
	var list []string
	for _, t := range ths {
		list = append(list, t.String())
	}
	req["ctx"], req["threads_list"], req["warmup"], req["steps"] = ctx, list, warmup, steps
	var resp struct{ Times map[string][]float64 }
	err := s.call(req, &resp)
	return resp.Times, err
}

// bestMedian returns the configuration with the lowest median and that
// median ("" and NaN if m is empty).
func bestMedian(m map[string][]float64) (string, float64) {
	th, t := "", math.NaN()
	for k, v := range m {
		if md := median(v); th == "" || md < t || (md == t && k < th) {
			th, t = k, md
		}
	}
	return th, t
}

func runDecode(o options, w io.Writer) error {
	py, err := startPyUnless(o)
	if err != nil {
		return err
	}
	defer py.close()
	sh := o.shape
	fmt.Fprintf(w, "decode: %d layers, d_model %d, %d heads, FFN %d, vocab %d; batch 1, one token per step, cache full (window = context), float32\n",
		sh.Layers, sh.DModel, sh.Heads, sh.FFN, sh.Vocab)
	fmt.Fprintf(w, "Go: %s, %s, layers.Decoder; threads %v", runtime.Version(), graph.BLASName(), o.threads)
	if py != nil {
		_, alloc, _ := pyAllocator(o.pyMalloc)
		fmt.Fprintf(w, "; PyTorch %s, %s, %s, threads (ATen+BLAS) %v", py.Torch, py.BLAS, alloc, o.pyThreads)
	}
	fmt.Fprintf(w, "\n%d warm-up + %d timed steps per side and configuration; median step time, best configuration\n\n", o.warmup, o.steps)
	// The steps allocate little; a collection between cells keeps one
	// cell's garbage out of the next one's timing.
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	var cells []decodeCell
	for _, ctx := range o.decodeCtx {
		for _, pos := range o.pos {
			c := decodeCell{ctx: ctx, pos: pos, goT: math.NaN(), pyT: math.NaN()}
			gt, fill, err := goDecodeTimes(sh, pos, ctx, o.threads, o.warmup, o.steps)
			if err != nil {
				return fmt.Errorf("decode %s ctx %d: Go: %w", pos, ctx, err)
			}
			c.goTh, c.goT = bestMedian(gt)
			c.goFill = fill
			runtime.GC()
			if py != nil {
				pt, err := py.decode(sh, pos, ctx, o.pyThreads, o.warmup, o.steps)
				if err != nil {
					return errors.WithMessagef(err, "decode %s ctx %d", pos, ctx)
				}
				c.pyTh, c.pyT = bestMedian(pt)
			}
			fmt.Fprintf(w, "ctx %-5d %-6s Go %.3f ms (%s; fill %.1f s)", ctx, pos, 1000*c.goT, c.goTh, fill)
			if py != nil {
				fmt.Fprintf(w, ", PyTorch %.3f ms (%s)", 1000*c.pyT, c.pyTh)
			}
			fmt.Fprintln(w)
			cells = append(cells, c)
		}
	}
	fmt.Fprintln(w)
	head, rows := decodeTable(cells, o.decodeCtx)
	writeTable(w, o.markdown, head, rows)
	return nil
}

// decodeTable is the table of -decode: a row per (context, encoding), with
// the growth of the time per token from the smallest context to this one
// (ratio of times, and that ratio over the ratio of contexts: 1 is linear
// growth, a constant cost per step gives less).
func decodeTable(cells []decodeCell, ctxs []int) ([]string, [][]string) {
	head := []string{"context", "encoding", "Go ms/token", "PyTorch ms/token", "Go/PyTorch", "Go growth", "PyTorch growth"}
	first := map[string]decodeCell{}
	for _, c := range cells {
		if f, ok := first[c.pos]; !ok || c.ctx < f.ctx {
			first[c.pos] = c
		}
	}
	f := func(v float64, format string) string {
		if math.IsNaN(v) {
			return "-"
		}
		return fmt.Sprintf(format, v)
	}
	var rows [][]string
	for _, c := range cells {
		b := first[c.pos]
		growth := func(t, t0 float64) string {
			if b.ctx == c.ctx || math.IsNaN(t) || math.IsNaN(t0) {
				return "-"
			}
			return fmt.Sprintf("%.1fx (%.2f of linear)", t/t0, (t/t0)/(float64(c.ctx)/float64(b.ctx)))
		}
		rows = append(rows, []string{strconv.Itoa(c.ctx), c.pos,
			f(1000*c.goT, "%.3f") + " (" + c.goTh + ")", pyCellString(c), f(c.goT/c.pyT, "%.2f"),
			growth(c.goT, b.goT), growth(c.pyT, b.pyT)})
	}
	return head, rows
}

func pyCellString(c decodeCell) string {
	if math.IsNaN(c.pyT) {
		return "-"
	}
	return fmt.Sprintf("%.3f (%s)", 1000*c.pyT, c.pyTh)
}
