package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand"
	"os"
	"sort"
	"strings"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// checkResult is the loss and the global gradient norm of one batch.
type checkResult struct {
	Loss, GradNorm float64
}

// goCheck builds the Go model of encoding pos in float32 with random,
// non-trivial weights (N(0, 0.2²); LayerNorm gains 1 + N(0, 0.1²)), runs one
// forward and backward pass on a random batch, and writes the weights (as
// F64), ids and targets to path for the PyTorch side. It returns Go's loss
// and gradient norm.
func goCheck(s Shape, pos, path string) (checkResult, error) {
	var res checkResult
	cfg := s.config(pos)
	g := G.NewGraph()
	p := graph.NewParams(tensor.Float32, 11)
	lm, err := layers.NewLM(g, p, cfg.Model)
	if err != nil {
		return res, err
	}
	rng := rand.New(rand.NewSource(13))
	ids := make([]int, s.Tokens())
	tgts := make([]int, s.Tokens())
	for i := range ids {
		ids[i], tgts[i] = rng.Intn(s.Vocab), rng.Intn(s.Vocab)
	}
	idsN := G.NewMatrix(g, tensor.Int, G.WithShape(s.Batch, s.Seq), G.WithName("ids"),
		G.WithValue(tensor.New(tensor.WithShape(s.Batch, s.Seq), tensor.WithBacking(ids))))
	tgtN := G.NewVector(g, tensor.Int, G.WithShape(s.Tokens()), G.WithName("targets"),
		G.WithValue(tensor.New(tensor.WithShape(s.Tokens()), tensor.WithBacking(tgts))))
	logits, err := lm.Fwd(idsN)
	if err != nil {
		return res, err
	}
	loss, err := graph.CrossEntropy(logits, tgtN)
	if err != nil {
		return res, err
	}
	tensors := map[string]stTensor{}
	for _, name := range p.Names() {
		info, _ := p.Info(name)
		data := make([]float64, info.Shape.TotalSize())
		for i := range data {
			data[i] = rng.NormFloat64() * 0.2
			if strings.HasSuffix(name, "/gamma") {
				data[i] = 1 + rng.NormFloat64()*0.1
			}
		}
		if err := p.Set(name, data); err != nil {
			return res, err
		}
		tensors[name] = stTensor{dtype: "F64", shape: info.Shape, f64: p.Float64s(name)}
	}
	tensors["ids"] = stTensor{dtype: "I64", shape: tensor.Shape{s.Batch, s.Seq}, i64: ids}
	tensors["targets"] = stTensor{dtype: "I64", shape: tensor.Shape{s.Tokens()}, i64: tgts}
	learn := lm.Learnables()
	if _, err := G.Grad(loss, learn...); err != nil {
		return res, err
	}
	m := G.NewTapeMachine(g, G.BindDualValues(learn...))
	defer m.Close()
	if err := m.RunAll(); err != nil {
		return res, err
	}
	res.Loss = graph.ToFloat64s(loss.Value())[0]
	var ss float64
	for _, n := range learn {
		gv, err := n.Grad()
		if err != nil {
			return res, errors.Wrapf(err, "gradient of %s", n.Name())
		}
		for _, x := range graph.ToFloat64s(gv) {
			ss += x * x
		}
	}
	res.GradNorm = math.Sqrt(ss)
	return res, writeSafetensors(path, tensors)
}

// stTensor is one tensor of a safetensors file: F64 data or I64 ids.
type stTensor struct {
	dtype string
	shape tensor.Shape
	f64   []float64
	i64   []int
}

// writeSafetensors writes tensors in the safetensors format (8-byte
// little-endian header length, JSON header padded to 8 bytes, data in name
// order), which testdata/golden/gen_golden.py reads.
func writeSafetensors(path string, tensors map[string]stTensor) error {
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	header := map[string]any{}
	var data bytes.Buffer
	for _, n := range names {
		t := tensors[n]
		start := data.Len()
		if t.dtype == "F64" {
			for _, x := range t.f64 {
				binary.Write(&data, binary.LittleEndian, x)
			}
		} else {
			for _, x := range t.i64 {
				binary.Write(&data, binary.LittleEndian, int64(x))
			}
		}
		shape := []int(t.shape)
		if shape == nil {
			shape = []int{}
		}
		header[n] = map[string]any{"dtype": t.dtype, "shape": shape, "data_offsets": []int{start, data.Len()}}
	}
	hb, err := json.Marshal(header)
	if err != nil {
		return err
	}
	for len(hb)%8 != 0 {
		hb = append(hb, ' ')
	}
	var out bytes.Buffer
	binary.Write(&out, binary.LittleEndian, uint64(len(hb)))
	out.Write(hb)
	out.Write(data.Bytes())
	return os.WriteFile(path, out.Bytes(), 0o644)
}
