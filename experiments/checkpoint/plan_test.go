package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/layers"
)

// TestPlanEval: the attention -stream chooses at each size, and what is
// refused before allocating (exit 2, with the estimate and the flag that
// helps).
func TestPlanEval(t *testing.T) {
	rope := layers.DefaultConfig() // 2 layers, d 128, 4 heads
	rope.Pos = "rope"
	cannot := errors.New("alibi+t5 cannot stream: ...")
	const gib = 1 << 30
	for _, c := range []struct {
		name      string
		len, b    int
		avail     float64
		mode      streamMode
		streamErr error
		stream    bool     // the choice, if no error
		want      []string // words of the refusal; nil: no refusal
	}{
		{"short window: materialised", 512, 8, 24 * gib, streamAuto, nil, false, nil},
		{"unknown memory: materialised", 512, 8, 0, streamAuto, nil, false, nil},
		{"long window: streamed", 60000, 1, 24 * gib, streamAuto, nil, true, nil},
		{"above 1 GiB: streamed", 8192, 1, 24 * gib, streamAuto, nil, true, nil},
		{"over the machine, cannot stream", 60000, 1, 24 * gib, streamAuto, cannot, false, []string{"-len 60000", "evaluation needs about", "24.0 GiB available", "smaller -len or -batch", "alibi+t5 cannot stream"}},
		{"above 1 GiB, cannot stream, fits", 8192, 1, 24 * gib, streamAuto, cannot, false, nil},
		{"-stream=false over the machine", 60000, 1, 24 * gib, streamOff, nil, false, []string{"materialised attention", "more than the 24.0 GiB available", "-stream (the streaming attention, O(T) memory) needs about"}},
		{"-stream=false fits", 8192, 1, 24 * gib, streamOff, nil, false, nil},
		{"-stream short", 64, 8, 24 * gib, streamOn, nil, true, nil},
		{"-stream cannot", 64, 8, 24 * gib, streamOn, cannot, false, []string{"-stream", "alibi+t5 cannot stream"}},
		{"streamed over the machine", 100000000, 1, 24 * gib, streamAuto, nil, true, []string{"streaming attention", "smaller -len or -batch"}},
		{"small -mem-limit", 4096, 8, 0.01 * gib, streamAuto, nil, false, []string{"10.2 MiB available", "streaming attention", "smaller -len or -batch"}},
		{"small -mem-limit, -stream=false", 4096, 8, 0.01 * gib, streamOff, nil, false, []string{"materialised attention", "even -stream needs about"}},
	} {
		p, err := planEval(planInput{Model: rope, Batch: c.b, Len: c.len, DtypeSize: 4, Avail: c.avail, Mode: c.mode, StreamErr: c.streamErr})
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			} else if p.Stream != c.stream {
				t.Errorf("%s: stream %v (%s), want %v", c.name, p.Stream, p.Why, c.stream)
			}
			continue
		}
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%s: %v, want a usage error", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", c.name, err, w)
			}
		}
	}
}

// TestStreamFlag: -stream alone is true, -stream=false off, auto the default.
func TestStreamFlag(t *testing.T) {
	for in, want := range map[string]streamMode{"true": streamOn, "false": streamOff, "auto": streamAuto, "1": streamOn} {
		var m streamMode
		if err := m.Set(in); err != nil || m != want {
			t.Errorf("Set(%q): %v, %v", in, m.String(), err)
		}
	}
	var m streamMode
	if err := m.Set("maybe"); err == nil {
		t.Error("Set(maybe) accepted")
	}
}
