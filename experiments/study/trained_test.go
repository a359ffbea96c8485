package study

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/posenc"
)

// TestEvalEach: an encoding's ErrBeyondTable gives an n/a row and the
// conditions go on; another error stops; a cancelled context stops with
// ErrInterrupted.
func TestEvalEach(t *testing.T) {
	eval := func(i int) (string, error) {
		if i == 1 {
			return "", fmt.Errorf("grid 14x14: %w", posenc.ErrBeyondTable)
		}
		return fmt.Sprint("ok", i), nil
	}
	na := func(i int, err error) string { return fmt.Sprint("na", i) }
	rows, err := EvalEach(context.Background(), 3, eval, na)
	if err != nil || fmt.Sprint(rows) != "[ok0 na1 ok2]" {
		t.Fatalf("rows %v, %v", rows, err)
	}
	boom := errors.New("boom")
	if _, err := EvalEach(context.Background(), 2, func(int) (string, error) { return "", boom }, na); !errors.Is(err, boom) {
		t.Errorf("failing condition: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := EvalEach(ctx, 2, eval, na); !errors.Is(err, trainer.ErrInterrupted) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestRunOptionsDefaults(t *testing.T) {
	o := RunOptions{}.WithDefaults("runs/x")
	if o.Dir != "runs/x" || o.SaveEvery != 100 || o.Log == nil {
		t.Errorf("defaults: %+v", o)
	}
	if o := (RunOptions{Dir: "d", SaveEvery: 7}).WithDefaults("runs/x"); o.Dir != "d" || o.SaveEvery != 7 {
		t.Errorf("given values replaced: %+v", o)
	}
	RunOptions{}.Logf("no writer: %d\n", 1) // must not panic
}

func TestCompareCSV(t *testing.T) {
	write := func(body string) string {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, FileCSV), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	a := write("encoding,seed,accuracy,train_ms_per_step,peak_rss_bytes,git_rev\nnone,1,0.5,10,100,abc\n")
	same := write("encoding,seed,accuracy,train_ms_per_step,peak_rss_bytes,git_rev\nnone,1,0.5,12,200,def\n")
	other := write("encoding,seed,accuracy,train_ms_per_step,peak_rss_bytes,git_rev\nnone,1,0.6,10,100,abc\n")
	if d, _, err := CompareCSV(a, same); err != nil || d != nil {
		t.Errorf("timings, memory and revision differ only: %v, %v", d, err)
	}
	if d, _, err := CompareCSV(a, other); err != nil || len(d) != 1 || !strings.Contains(d[0], "accuracy 0.5 != 0.6") {
		t.Errorf("an accuracy differs: %v, %v", d, err)
	}
	// a column added since (machine) is a note; the common ones are compared
	added := write("encoding,machine,seed,accuracy\nnone,linux,1,0.5\n")
	if d, n, err := CompareCSV(a, added); err != nil || d != nil || len(n) != 1 || !strings.Contains(n[0], "machine only in") {
		t.Errorf("an added column: %v, %v, %v", d, n, err)
	}
	if d, _, _ := CompareCSV(a, write("encoding,seed,accuracy\nnone,1,0.5\nnone,2,0.5\n")); len(d) != 1 {
		t.Errorf("a row more: %v", d)
	}
}
