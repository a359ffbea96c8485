package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestExitCodes: -jobs lists the fine-tunings; bad flags exit 2; a run
// whose source models are not trained exits 1 naming the command that
// trains them.
func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want int
		out  string
	}{
		{[]string{"-jobs"}, 0, "0 rope-seed1\n1 rope-pi-seed1\n2 rope-yarn-seed1\n3 alibi-seed1\n"},
		{[]string{"-preset", "huge"}, 2, "unknown preset"},
		{[]string{"-encodings", "sandwich"}, 2, "does not train"},
		{[]string{"-seeds", "x"}, 2, "not an integer"},
		{[]string{"-from", filepath.Join(dir, "none"), "-out", filepath.Join(dir, "out")}, 1, "go run ./experiments/extrapolation -preset quick"},
		{[]string{"-steps", "20", "-jobs"}, 0, "0 rope-seed1"},
	} {
		var out, errw bytes.Buffer
		if got := run(c.args, &out, &errw); got != c.want || !strings.Contains(out.String()+errw.String(), c.out) {
			t.Errorf("finetune %q: exit %d, want %d with %q:\n%s%s", c.args, got, c.want, c.out, out.String(), errw.String())
		}
	}
}
