package layers_test

import (
	"fmt"
	"math"
	"runtime"
	"testing"
	"weak"

	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// liveHeap is the live heap in bytes once collections stop freeing
// memory (at least three: sync.Pool's victim cache). An object with a finalizer (a Gorgonia tape machine) found
// unreachable keeps everything it reaches (its graph) alive until the
// finalizer goroutine has run it, so one or two runtime.GC calls may not
// free a closed runner's graph yet.
func liveHeap() uint64 {
	var ms runtime.MemStats
	last := uint64(math.MaxUint64)
	for i := 0; i < 20; i++ {
		runtime.GC()
		runtime.Gosched() // let the finalizer goroutine run
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc >= last && i >= 2 {
			break
		}
		last = ms.HeapAlloc
	}
	return ms.HeapAlloc
}

// closeMemoryRuns runners are built, run and closed; the live heap may grow
// by less than closeMemoryBound over them (it grows by 0-11 KiB). Each
// runner's graph below holds about 0.7-0.9 MiB (SegmentRunner) or 0.23 MiB
// (Decoder) of parameter nodes, activations and the machine's values, all
// of it retained (+3.4-4.7 MiB and +1.1 MiB over 5 runners) when the Read
// target of the logits was a field of the runner: the tape machine has a
// finalizer, so the cycle runner -> machine -> &runner.logits -> runner
// was never collected.
const (
	closeMemoryRuns  = 5
	closeMemoryBound = 256 << 10
)

// checkCloseMemory calls build (which builds, runs and closes a runner and
// returns it) once to warm up (the parameters are created then), then
// closeMemoryRuns times, and fails if a closed runner is still reachable
// after GC or the live heap grew by closeMemoryBound or more.
func checkCloseMemory[R any](t *testing.T, build func() (*R, error)) {
	t.Helper()
	warmUp(t, build)
	h0 := liveHeap()
	ws := make([]weak.Pointer[R], 0, closeMemoryRuns)
	for i := 0; i < closeMemoryRuns; i++ {
		r, err := build()
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, weak.Make(r))
	}
	h1 := liveHeap()
	runtime.KeepAlive(build) // and the parameters it holds, measured in h0
	growth := int64(h1) - int64(h0)
	t.Logf("live heap %.2f MiB -> %.2f MiB (%+d KiB) over %d closed runners", float64(h0)/(1<<20), float64(h1)/(1<<20), growth>>10, closeMemoryRuns)
	alive := 0
	for _, w := range ws {
		if w.Value() != nil {
			alive++
		}
	}
	if alive > 0 {
		t.Errorf("%d of %d closed runners are still reachable after GC", alive, closeMemoryRuns)
	}
	if growth >= closeMemoryBound {
		t.Errorf("live heap grew by %d KiB over %d closed runners, want < %d KiB", growth>>10, closeMemoryRuns, closeMemoryBound>>10)
	}
}

// warmUp calls build once; apart, so that no stack slot of the caller
// still holds the runner when the heap is measured.
//
//go:noinline
func warmUp[R any](t *testing.T, build func() (*R, error)) {
	t.Helper()
	if _, err := build(); err != nil {
		t.Fatal(err)
	}
}

// closeMemoryConfig is a small causal model (xl: memory and the decoder's
// memoised P = R·W_r).
func closeMemoryConfig() layers.Config {
	cfg := segConfig("xl")
	cfg.DModel, cfg.FFN = 32, 64
	return cfg
}

// TestSegmentRunnerCloseReleasesMemory: a closed SegmentRunner, with and
// without memory, leaves nothing reachable behind.
func TestSegmentRunnerCloseReleasesMemory(t *testing.T) {
	for _, m := range []int{0, 16} {
		t.Run(fmt.Sprintf("M=%d", m), func(t *testing.T) {
			p := graph.NewParams(tensor.Float64, 1)
			segRandomize(t, p, 1)
			ids := segIDs(2, 32, 2)
			checkCloseMemory(t, func() (*layers.SegmentRunner, error) {
				r, err := layers.NewSegmentRunner(p, closeMemoryConfig(), 2, 16, m)
				if err != nil {
					return nil, err
				}
				if _, err := r.Run(ids); err != nil {
					return nil, err
				}
				return r, r.Close()
			})
		})
	}
}

// TestDecoderCloseReleasesMemory: a closed Decoder leaves nothing
// reachable behind.
func TestDecoderCloseReleasesMemory(t *testing.T) {
	p := graph.NewParams(tensor.Float64, 1)
	segRandomize(t, p, 1)
	checkCloseMemory(t, func() (*layers.Decoder, error) {
		r, err := layers.NewDecoder(p, closeMemoryConfig(), 2, 16, 0)
		if err != nil {
			return nil, err
		}
		for i := 0; i < 20; i++ { // past the window: the cache slides
			if _, err := r.Step([]int{i % 256, (7 * i) % 256}); err != nil {
				return nil, err
			}
		}
		return r, r.Close()
	})
}
