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

func startPy(python string) (*pyServer, error) {
	cmd := exec.Command(python, scriptPath(), "--serve")
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

func (s *pyServer) close() {
	s.in.Write([]byte(`{"cmd": "quit"}` + "\n"))
	s.in.Close()
	s.cmd.Wait()
}
