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

// ErrLocked is wrapped by the error of Lock when another process (or another
// Lock call of this process) holds the lock; any other error of Lock is a
// path that cannot be written (see CheckDir).
var ErrLocked = errors.New("locked by another run")

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
	if err := CheckDir(filepath.Dir(path)); err != nil {
		return nil, errors.WithMessagef(err, "cannot create the lock file %s", path)
	}
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
				return nil, fmt.Errorf("%s is %w (%s); wait for it to finish or stop it, or use another output path",
					path, ErrLocked, holder(path))
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

// CheckDir checks that files can be created in the directory dir, and
// leaves nothing behind: if dir does not exist it is created, a temporary
// file is created and removed in it, and the directories it created are
// removed again. Its error says what is wrong with the path: a part of it
// that is a file, not a directory; a directory that cannot be created or
// written (permissions, a read-only or virtual file system), with the
// system's reason. Commands call it before loading data, so a bad output
// path fails at once.
func CheckDir(dir string) error {
	dir = filepath.Clean(dir)
	// The deepest part of dir that exists must be a directory.
	p := dir
	for {
		st, err := os.Stat(p)
		if err == nil {
			if !st.IsDir() {
				if p == dir {
					return errors.Errorf("directory %s: it exists and is a file, not a directory", dir)
				}
				return errors.Errorf("directory %s cannot be created: %s is a file, not a directory", dir, p)
			}
			break
		}
		if !os.IsNotExist(err) && !errors.Is(err, syscall.ENOTDIR) {
			return errors.Errorf("directory %s: %v", dir, unwrapPathError(err))
		}
		q := filepath.Dir(p)
		if q == p {
			break
		}
		p = q
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return errors.Errorf("directory %s cannot be created: %v", dir, unwrapPathError(err))
	}
	// Remove the directories made here, deepest first (each is empty).
	defer func() {
		for q := dir; q != p && len(q) > len(p); q = filepath.Dir(q) {
			os.Remove(q)
		}
	}()
	f, err := os.CreateTemp(dir, ".rpe-write-check-*")
	if err != nil {
		return errors.Errorf("directory %s is not writable: %v", dir, unwrapPathError(err))
	}
	f.Close()
	if err := os.Remove(f.Name()); err != nil {
		return errors.Errorf("directory %s: removing a test file: %v", dir, unwrapPathError(err))
	}
	return nil
}

// unwrapPathError returns the system's reason of a *fs.PathError ("permission
// denied"), without the operation and path that the caller names itself.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
