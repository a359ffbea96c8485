package trainer

import (
	"errors"
	"math"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// fakeMemory makes memAvailable report avail bytes (ok false if avail < 0)
// and count its calls, until the test ends.
func fakeMemory(t *testing.T, avail float64) *int {
	t.Helper()
	old := memAvailable
	calls := new(int)
	memAvailable = func() (float64, bool) {
		*calls++
		return avail, avail >= 0
	}
	t.Cleanup(func() { memAvailable = old })
	return calls
}

// evalAllocated returns the bytes NewEvaluator of model [b, le] and one
// forward pass allocate (the garbage collector off), the weights existing
// already.
func evalAllocated(t *testing.T, model layers.Config, b, le int) float64 {
	t.Helper()
	p := graph.NewParams(tensor.Float64, 1)
	e0, err := NewEvaluator(p, model, 1, 2) // create the weights
	if err != nil {
		t.Fatal(err)
	}
	e0.Close()
	var m0, m1 runtime.MemStats
	runtime.GC()
	old := debug.SetGCPercent(-1)
	runtime.ReadMemStats(&m0)
	e, err := NewEvaluator(p, model, b, le)
	if err == nil {
		err = e.forward(make([]int, b*le), func(int, []float64) error { return nil })
	}
	runtime.ReadMemStats(&m1)
	debug.SetGCPercent(old)
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	return float64(m1.TotalAlloc - m0.TotalAlloc)
}

// TestEstimateEvalMemory compares EstimateEvalMemory with the bytes
// NewEvaluator and one forward pass allocate, for materialised and
// streamed attention and encodings of each kind of cost (none, rope,
// alibi: a score bias, shaw: terms): within a factor of 2. It also checks
// that the streamed estimate has no T² term: at 16× the length it grows
// less than 32×, the materialised one more than 100×.
func TestEstimateEvalMemory(t *testing.T) {
	for _, pos := range []string{"none", "rope", "alibi", "shaw"} {
		for _, stream := range []bool{false, true} {
			for _, c := range []struct{ d, ffn, layers, heads, batch, le int }{{128, 512, 1, 4, 4, 256}, {16, 32, 1, 2, 1, 1024}, {64, 256, 2, 4, 2, 384}} {
				m := layers.Config{Vocab: 256, DModel: c.d, Heads: c.heads, Layers: c.layers, FFN: c.ffn, Eps: 1e-5, InitStd: 0.02,
					Causal: true, Pos: pos, Stream: stream}
				got, est := evalAllocated(t, m, c.batch, c.le), EstimateEvalMemory(m, c.batch, c.le, 8)
				if est.Total > 2*got || got > 2*est.Total {
					t.Errorf("%s stream=%v %+v: estimate %s, allocated %s", pos, stream, c, est, bytesString(got))
				}
			}
		}
	}
	m := layers.DefaultConfig()
	m.Pos = "rope"
	short, long := EstimateEvalMemory(m, 1, 4096, 4), EstimateEvalMemory(m, 1, 65536, 4)
	if r := long.Total / short.Total; r < 100 {
		t.Errorf("materialised: ×%.0f from 4096 to 65536 tokens", r)
	}
	m.Stream = true
	short, long = EstimateEvalMemory(m, 1, 4096, 4), EstimateEvalMemory(m, 1, 65536, 4)
	if r := long.Total / short.Total; r > 32 || long.Scores != 0 {
		t.Errorf("streamed: ×%.0f from 4096 to 65536 tokens, scores %s", r, bytesString(long.Scores))
	}
}

// TestCheckEvalMemory fakes a machine of 1 GiB: a 2-layer rope model at
// 8192 tokens is refused materialised, with the estimate, the memory
// available and -stream with its estimate; streamed it fits. An encoding
// that cannot stream (alibi+t5) is told to shorten -len instead, and an
// unknown available memory checks nothing.
func TestCheckEvalMemory(t *testing.T) {
	fakeMemory(t, 1<<30)
	m := layers.DefaultConfig()
	m.Pos = "rope"
	err := CheckEvalMemory(m, 1, 8192, 4, 0)
	wantErr(t, err, "evaluation needs about", "materialised attention, batch 1 × 8192", "more than the 1.0 GiB available", "-stream", "needs about")
	var me *MemoryError
	if !errors.As(err, &me) || me.Estimate.Total <= 1<<30 || me.Avail != 1<<30 {
		t.Errorf("error %v is not a *MemoryError with the estimate above 1 GiB", err)
	}
	s := m
	s.Stream = true
	if err := CheckEvalMemory(s, 1, 8192, 4, 0); err != nil {
		t.Errorf("streamed: %v", err)
	}
	wantErr(t, CheckEvalMemory(s, 64, 65536, 4, 0), "streaming attention", "smaller -len or -batch")
	if err := CheckEvalMemory(m, 1, 8192, 4, 1<<40); err != nil {
		t.Errorf("explicit 1 TiB: %v", err)
	}
	a := m
	a.Pos = "alibi+t5"
	err = CheckEvalMemory(a, 1, 8192, 4, 0)
	wantErr(t, err, "smaller -len or -batch", "alibi+t5 cannot stream")
	if strings.Contains(err.Error(), "use -stream") {
		t.Errorf("an encoding that cannot stream is told to stream: %v", err)
	}
	fakeMemory(t, -1)
	if err := CheckEvalMemory(m, 1, 1<<20, 4, 0); err != nil {
		t.Errorf("unknown memory: %v", err)
	}
}

// TestNewEvaluatorRefusesMemory: on a faked machine of 64 MiB a [1, 4096]
// materialised graph is refused before it is built (nothing allocated
// worth the name), with a *MemoryError; the streamed one is built.
func TestNewEvaluatorRefusesMemory(t *testing.T) {
	fakeMemory(t, 64<<20)
	m := tinyConfig().Model
	p := graph.NewParams(tensor.Float64, 1)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	_, err := NewEvaluator(p, m, 1, 4096)
	runtime.ReadMemStats(&m1)
	var me *MemoryError
	if !errors.As(err, &me) {
		t.Fatalf("NewEvaluator [1, 4096] on 64 MiB: %v, want a *MemoryError", err)
	}
	wantErr(t, err, "evaluator: [1, 4096] graph", "evaluation needs about", "64.0 MiB available", "-stream")
	if got := m1.TotalAlloc - m0.TotalAlloc; got > 4<<20 {
		t.Errorf("refusing allocated %d bytes", got)
	}
	m.Stream = true
	e, err := NewEvaluator(p, m, 1, 4096)
	if err != nil {
		t.Fatalf("streamed: %v", err)
	}
	e.Close()
}

// TestScoreTextTooShort: a text shorter than one window is refused by
// ScoreText and Evaluate before any graph is built (the memory is never
// consulted), with ErrTooShort and both lengths.
func TestScoreTextTooShort(t *testing.T) {
	calls := fakeMemory(t, 1<<40)
	cfg := tinyConfig()
	p := graph.NewParams(tensor.Float64, 1)
	text := []byte("0123456789")
	for _, le := range []int{10, 16, 100000000} {
		_, err := ScoreText(p, cfg.Model, text, []int{0}, EvalOptions{Len: le})
		if !errors.Is(err, ErrTooShort) {
			t.Fatalf("ScoreText Len %d: %v, want ErrTooShort", le, err)
		}
		wantErr(t, err, "10 bytes", "window length "+strconv.Itoa(le))
		_, err = Evaluate(p, cfg.Model, text, EvalOptions{Len: le})
		if !errors.Is(err, ErrTooShort) {
			t.Fatalf("Evaluate Len %d: %v, want ErrTooShort", le, err)
		}
	}
	if *calls != 0 {
		t.Errorf("the memory was consulted %d times: a graph was about to be built", *calls)
	}
	if _, err := ScoreText(p, cfg.Model, text, []int{0}, EvalOptions{Len: 9}); err != nil {
		t.Errorf("Len 9 on 10 bytes: %v", err)
	}
}

// TestSampleTemperature: NaN and ±Inf temperatures are errors naming the
// temperature; a finite one (and 0: greedy) samples.
func TestSampleTemperature(t *testing.T) {
	cfg := tinyConfig()
	p := graph.NewParams(tensor.Float64, 1)
	for _, temp := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		_, err := Sample(p, cfg.Model, SampleOptions{Prompt: []byte("ab"), N: 3, Temperature: temp, Window: 8})
		wantErr(t, err, "temperature", "must be finite")
	}
	for _, temp := range []float64{0, 0.5, -1} {
		out, err := Sample(p, cfg.Model, SampleOptions{Prompt: []byte("ab"), N: 3, Temperature: temp, Window: 8})
		if err != nil || len(out) != 3 {
			t.Errorf("temperature %v: %q, %v", temp, out, err)
		}
	}
}
