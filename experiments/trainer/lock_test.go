package trainer

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestCheckDir: a directory that can be written passes, and a missing one
// passes without being left behind; a path through a file, a file itself and
// a directory that cannot be created are refused with the part at fault
// named. Lock reports such a path as a path problem, never as "locked by
// another run" (ErrLocked), which it keeps for a lock another holder has.
func TestCheckDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "afile")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckDir(dir); err != nil {
		t.Errorf("writable directory: %v", err)
	}
	deep := filepath.Join(dir, "new", "a", "b")
	if err := CheckDir(deep); err != nil {
		t.Errorf("missing directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); !os.IsNotExist(err) {
		t.Errorf("CheckDir left %s behind (%v)", filepath.Join(dir, "new"), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("CheckDir left files in %s: %v", dir, ents)
	}
	for _, c := range []struct {
		dir  string
		want []string
	}{
		{filepath.Join(file, "sub"), []string{file + " is a file, not a directory"}},
		{file, []string{file, "it exists and is a file"}},
		{"/proc/rpe-no-such-dir/x", []string{"/proc/rpe-no-such-dir/x cannot be created"}},
	} {
		err := CheckDir(c.dir)
		wantErr(t, err, c.want...)
		_, lerr := Lock(filepath.Join(c.dir, "x.lock"))
		wantErr(t, lerr, "cannot create the lock file")
		if errors.Is(lerr, ErrLocked) {
			t.Errorf("Lock in %s: %v is ErrLocked", c.dir, lerr)
		}
	}
	unlock, err := Lock(filepath.Join(dir, "held.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := Lock(filepath.Join(dir, "held.lock")); !errors.Is(err, ErrLocked) {
		t.Errorf("a held lock: %v, want ErrLocked", err)
	}
}
