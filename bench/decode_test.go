package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDecodeGoOnly runs the decode mode on a small model, Go side only, and
// checks the table's rows and growth columns.
func TestDecodeGoOnly(t *testing.T) {
	var out, errw strings.Builder
	args := []string{"-decode", "-go-only", "-decode-ctx", "8,32", "-pos", "none,rope,xl", "-steps", "2", "-warmup-steps", "1",
		"-d-model", "16", "-heads", "2", "-layers", "1", "-ffn", "32", "-md"}
	if st := mainStatus(args, &out, &errw); st != 0 {
		t.Fatalf("bench %v: status %d, stderr %s", args, st, errw.String())
	}
	s := out.String()
	for _, want := range []string{"decode: 1 layers, d_model 16, 2 heads", "layers.Decoder", "| 32 | xl |", "of linear)"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "\n| 32 |"); n != 3 {
		t.Errorf("%d rows at context 32, want 3:\n%s", n, s)
	}
}

// TestDecodeFlags: bad contexts and mixed modes are refused before anything
// runs.
func TestDecodeFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-decode", "-go-only", "-decode-ctx", "512,1"}, `bench: -decode-ctx: bad context "1"`},
		{[]string{"-decode", "-go-only", "-eval"}, "bench: -decode is a mode of its own"},
	} {
		var out, errw strings.Builder
		if st := mainStatus(c.args, &out, &errw); st != 2 || !strings.Contains(errw.String(), c.want) {
			t.Errorf("bench %v: status %d, stderr %q; want 2 and %q", c.args, st, errw.String(), c.want)
		}
	}
}

// TestTorchDecodeCheck runs torch_bench.py's checks (the training model
// against gen_golden, and its decoding loop against its forward pass at
// every step) when Debian's python3-torch is installed; CI has none.
func TestTorchDecodeCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import torch").Run(); err != nil {
		t.Skip("no /usr/bin/python3 with torch (apt-get install python3-torch)")
	}
	b, err := exec.Command("/usr/bin/python3", scriptPath(), "--self-check").CombinedOutput()
	if err != nil || !strings.Contains(string(b), "decode check: ok") {
		t.Fatalf("torch_bench.py --self-check: %v\n%s", err, b)
	}
}
