package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/pkg/errors"
)

// pyServer is the PyTorch side: bench/torch_bench.py --serve, one JSON
// object per line each way.
type pyServer struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Scanner
	Torch string
	BLAS  string
}

// scriptPath finds torch_bench.py next to this package's source (go run
// ./bench from the repository root, or go test in bench/).
func scriptPath() string {
	candidates := []string{"bench/torch_bench.py", "torch_bench.py"}
	if _, file, _, ok := runtime.Caller(0); ok {
		candidates = append([]string{filepath.Join(filepath.Dir(file), "torch_bench.py")}, candidates...)
	}
	for _, c := range candidates {
		if _, err := os.Stat(c); err == nil {
			return c
		}
	}
	return "bench/torch_bench.py"
}

// tcmallocPaths are where Debian's libtcmalloc-minimal4 puts the library.
var tcmallocPaths = []string{"/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4", "/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4"}

// pyAllocator resolves -py-malloc: the library to preload into the PyTorch
// side ("" for glibc's malloc) and its name for the tables. "auto" takes
// tcmalloc when it is installed: PyTorch allocates a fresh buffer for most
// ops, glibc returns large ones to the kernel when they are freed, and on
// machines where touching a fresh page is slow (this VM: about 30 µs per
// 4 KiB page) that, not the arithmetic, dominates PyTorch's time; PyTorch's
// CPU performance tuning guide recommends tcmalloc or jemalloc for this.
// Go reuses its buffers across passes, so the comparison is fairer with it.
func pyAllocator(opt string) (lib, name string, err error) {
	switch opt {
	case "system", "":
		return "", "glibc malloc", nil
	case "auto":
		for _, p := range tcmallocPaths {
			if _, err := os.Stat(p); err == nil {
				return p, "tcmalloc", nil
			}
		}
		return "", "glibc malloc (tcmalloc not installed: apt-get install libtcmalloc-minimal4)", nil
	}
	if _, err := os.Stat(opt); err != nil {
		return "", "", errors.Errorf("bench: -py-malloc %q: no such library (auto, system, or a path to LD_PRELOAD)", opt)
	}
	return opt, filepath.Base(opt), nil
}

// pyCommand is exec.Command(python, args...) with -py-malloc's library
// preloaded.
func pyCommand(o options, args ...string) (*exec.Cmd, error) {
	lib, _, err := pyAllocator(o.pyMalloc)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(o.python, args...)
	if lib != "" {
		cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib)
	}
	return cmd, nil
}

func startPy(o options) (*pyServer, error) {
	python := o.python
	cmd, err := pyCommand(o, scriptPath(), "--serve")
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, errors.Wrapf(err, "bench: starting %s (Debian's python3 with python3-torch)", python)
	}
	sc := bufio.NewScanner(outp)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	s := &pyServer{cmd: cmd, in: in, out: sc}
	var hello struct {
		Ready bool
		Torch string
		BLAS  string `json:"blas"`
	}
	if err := s.read(&hello); err != nil {
		cmd.Process.Kill()
		return nil, errors.WithMessage(err, "bench: PyTorch side did not start")
	}
	s.Torch, s.BLAS = hello.Torch, hello.BLAS
	return s, nil
}

func (s *pyServer) read(v any) error {
	if !s.out.Scan() {
		if err := s.out.Err(); err != nil {
			return err
		}
		return errors.New("bench: PyTorch side closed its output")
	}
	var e struct{ Error string }
	if err := json.Unmarshal(s.out.Bytes(), &e); err == nil && e.Error != "" {
		return errors.New("bench: PyTorch side: " + e.Error)
	}
	return json.Unmarshal(s.out.Bytes(), v)
}

func (s *pyServer) call(req map[string]any, resp any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := s.in.Write(append(b, '\n')); err != nil {
		return err
	}
	return s.read(resp)
}

func (s *pyServer) request(cmd string, sh Shape, pos string) map[string]any {
	return map[string]any{"cmd": cmd, "pos": pos, "B": sh.Batch, "T": sh.Seq, "d": sh.DModel,
		"heads": sh.Heads, "layers": sh.Layers, "ff": sh.FFN}
}

// time runs warmup and timed steps on the PyTorch side.
func (s *pyServer) time(sh Shape, pos string, th pyThreads, warmup, steps int) ([]float64, float64, error) {
	req := s.request("run", sh, pos)
	req["threads"], req["blas_threads"], req["warmup"], req["steps"] = th.aten, th.blas, warmup, steps
	var resp struct {
		Times []float64
		Loss  float64
	}
	err := s.call(req, &resp)
	return resp.Times, resp.Loss, err
}

// check asks for the loss and gradient norm of the weights and batch in file.
func (s *pyServer) check(sh Shape, pos, file string) (checkResult, error) {
	req := s.request("check", sh, pos)
	req["file"] = file
	var resp struct {
		Loss     float64 `json:"loss"`
		GradNorm float64 `json:"grad_norm"`
	}
	err := s.call(req, &resp)
	return checkResult{Loss: resp.Loss, GradNorm: resp.GradNorm}, err
}

// close stops the PyTorch side (nothing for a nil server: -go-only).
func (s *pyServer) close() {
	if s == nil {
		return
	}
	s.in.Write([]byte(`{"cmd": "quit"}` + "\n"))
	s.in.Close()
	s.cmd.Wait()
}
