package trainer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pkg/errors"
)

// LockPath is the lock file of a checkpoint: path + ".lock".
func LockPath(ckpt string) string { return ckpt + ".lock" }

// Lock takes an exclusive advisory lock (flock LOCK_EX|LOCK_NB) on the file
// path, creating it (mode 0644) and its directory if needed, and writes the
// holder into it: pid, host, command line and start time. If another
// process (or another Lock call of this process) holds it, Lock returns at
// once with an error naming the file and the holder as the file describes
// it.
//
// unlock removes the file and releases the lock; call it once, on a clean
// exit. If the process dies, the kernel releases the lock and the file is
// left behind with the last holder's description; a left-over file is
// harmless, since only the kernel lock counts (Lock checks, after locking,
// that the file it locked is still the one at path, so removal on unlock
// cannot let two holders in).
//
// Run locks LockPath(Ckpt) for the whole run; the study locks its output
// directory the same way.
func Lock(path string) (unlock func() error, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, errors.Wrapf(err, "lock %s", path)
	}
	for attempt := 0; ; attempt++ {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, errors.Wrapf(err, "lock %s", path)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if err == syscall.EWOULDBLOCK {
				return nil, errors.Errorf("%s is locked by another run (%s); wait for it to finish or stop it, or use another output path",
					path, holder(path))
			}
			return nil, errors.Wrapf(err, "lock %s", path)
		}
		// The holder may have removed the file between our open and flock:
		// then we hold a lock on an unlinked file; try again.
		fi, err1 := f.Stat()
		pi, err2 := os.Stat(path)
		if err1 != nil || err2 != nil || !os.SameFile(fi, pi) {
			f.Close()
			if attempt < 10 {
				continue
			}
			return nil, errors.Errorf("lock %s: the file keeps changing under us", path)
		}
		host, _ := os.Hostname()
		desc := fmt.Sprintf("pid %d on %s since %s: %s\n", os.Getpid(), host, time.Now().Format(time.RFC3339),
			strings.Join(os.Args, " "))
		if err := f.Chmod(0o644); err == nil {
			if err := f.Truncate(0); err == nil {
				f.WriteAt([]byte(desc), 0)
			}
		}
		done := false
		return func() error {
			if done {
				return nil
			}
			done = true
			err := os.Remove(path)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			return errors.Wrapf(err, "unlock %s", path)
		}, nil
	}
}

// holder is the description a lock file holds.
func holder(path string) string {
	b, err := os.ReadFile(path)
	s := strings.TrimSpace(string(b))
	if err != nil || s == "" {
		return "holder unknown"
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
