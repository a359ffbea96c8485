package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestExitCodes: bad usage and configurations that cannot fit exit 2
// before anything runs; an exploding learning rate exits 1 and leaves no
// checkpoint.
func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck.safetensors")
	corpus := filepath.Join(dir, "c.txt")
	text := make([]byte, 4000)
	for i := range text {
		text[i] = "abcdefgh ij\n"[i%12]
	}
	os.WriteFile(corpus, text, 0o644)
	tiny := []string{"-d", "16", "-heads", "2", "-layers", "1", "-ffn", "32", "-batch", "2", "-seq", "16", "-eval-batch", "4",
		"-sample", "0", "-corpus", corpus, "-ckpt", ck}
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"-batch", "1000000000"}, 2},
		{[]string{"-d", "1000000"}, 2},
		{[]string{"-layers", "100000"}, 2},
		{[]string{"-corpus", "/dev/zero"}, 2},
		{[]string{"-fresh", "-resume", ck}, 2},
		{[]string{"-no-such-flag"}, 2},
		{append(append([]string(nil), tiny...), "-lr", "1e300", "-steps", "1"), 1},
		{append(append([]string(nil), tiny...), "-lr", "1e300", "-steps", "3", "-save-every", "1"), 1},
		{append(append([]string(nil), tiny...), "-dump-config"), 0},
	} {
		if got := run(c.args); got != c.want {
			t.Errorf("train %q: exit %d, want %d", c.args, got, c.want)
		}
	}
	if _, err := os.Stat(ck); !os.IsNotExist(err) {
		t.Errorf("a checkpoint was left by the exploding runs: %v", err)
	}
	if got := run(append(append([]string(nil), tiny...), "-steps", "2")); got != 0 {
		t.Errorf("tiny run: exit %d", got)
	}
}
