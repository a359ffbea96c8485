package layers

import (
	"fmt"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

// SegmentRunner evaluates a language model on sequences longer than its
// window, segment by segment, with the segment-level recurrence of
// Transformer-XL (Dai et al. 2019, "Transformer-XL: Attentive Language
// Models Beyond a Fixed-Length Context", Sec. 3.2): every block of segment
// s+1 attends to its own T tokens and to the M most recent inputs of that
// block from the segments before (Options.Mems), held as constants, so no
// gradient flows into them.
//
// One graph is built for B sequences, segments of T tokens and a memory of M
// states per block, and reused for every segment: the tokens sit at
// positions M..M+T-1 and the memory at 0..M-1 in every segment. That is
// exact for encodings that depend only on position differences (xl, t5,
// shaw, alibi, deberta; rope up to rounding); absolute encodings (sinusoidal,
// learned) see positions relative to the window. Memory slots not filled yet
// (at the start of a sequence, or while fewer than M tokens have been seen)
// are masked out.
//
// With a causal model, Run gives every token p the outputs (up to rounding) of the
// full computation over the whole sequence in which token p attends to the
// tokens q with s(p)·T - M <= q <= p, s(p) = floor(p/T) being its segment
// (the attention span of a token at position i of its segment is M + i + 1);
// for M >= (number of segments - 1)·T that is plain causal attention.
//
// A SegmentRunner is not safe for concurrent use. Close releases it.
type SegmentRunner struct {
	// B is the number of sequences, T the segment length and M the memory
	// length (0: segments are independent).
	B, T, M int

	lm   *LM
	g    *G.ExprGraph
	p    *graph.Params
	ids  []int           // backing of the [B, T] ids input
	mems []*tensor.Dense // per block [B, M, d], bound to the Mems inputs
	mask *tensor.Dense   // [1, 1, 1, M+T]; unfilled memory slots are 0
	// logits and hidden are the Read targets (copies written at run
	// time): the logits [B*T, V] and each block's input [B, T, d]. They
	// are allocated apart from the runner, never fields of it: the tape
	// machine holds pointers to them, and it has a finalizer, so a cycle
	// runner -> machine -> &runner.field -> runner is never collected
	// (runtime.SetFinalizer) and would keep the whole graph alive.
	logits *G.Value
	hidden []G.Value
	vm     G.VM
	filled int // valid memory states, <= M
}

// NewSegmentRunner builds the graph of the model cfg (parameters from p,
// shared with every other graph built from p) for b sequences, segments of t
// tokens and a memory of m states per block (m = 0: no memory). It returns
// the error of an invalid size or configuration, or of an encoding that
// cannot serve positions 0..m+t-1.
func NewSegmentRunner(p *graph.Params, cfg Config, b, t, m int) (*SegmentRunner, error) {
	if b <= 0 || t <= 0 || m < 0 {
		return nil, errors.Errorf("segments: batch %d and segment length %d must be positive and memory %d not negative", b, t, m)
	}
	g := G.NewGraph()
	lm, err := NewLM(g, p, cfg)
	if err != nil {
		return nil, err
	}
	r := &SegmentRunner{B: b, T: t, M: m, lm: lm, g: g, p: p, ids: make([]int, b*t), logits: new(G.Value)}
	ids := G.NewTensor(g, tensor.Int, 2, G.WithShape(b, t), G.WithName(graph.UniqueName(g, "segment_ids")),
		G.WithValue(tensor.New(tensor.WithShape(b, t), tensor.WithBacking(r.ids))))
	o := Options{Start: m}
	if m > 0 {
		dt, d := p.Dtype(), cfg.DModel
		for l := 0; l < cfg.Layers; l++ {
			mv := graph.FromFloat64s(dt, tensor.Shape{b, m, d}, make([]float64, b*m*d))
			r.mems = append(r.mems, mv)
			o.Mems = append(o.Mems, G.NewTensor(g, dt, 3, G.WithShape(b, m, d), G.WithValue(mv),
				G.WithName(graph.UniqueName(g, fmt.Sprintf("block%d/mem", l)))))
		}
		r.mask = graph.FromFloat64s(dt, tensor.Shape{1, 1, 1, m + t}, make([]float64, m+t))
		o.Mask = graph.MaskNode(g, r.mask, graph.UniqueName(g, "segment_mem_mask"))
	}
	logits, err := lm.FwdWith(ids, o)
	if err != nil {
		return nil, errors.Wrapf(err, "segments: B=%d T=%d M=%d", b, t, m)
	}
	// Read nodes copy the values when they are computed: after RunAll the
	// machine may have reused an intermediate node's memory.
	G.Read(logits, r.logits)
	if m > 0 {
		hid := lm.Hidden()
		r.hidden = make([]G.Value, len(hid)) // its own allocation (see logits)
		for l, h := range hid {
			G.Read(h, &r.hidden[l])
		}
	}
	r.vm = G.NewTapeMachine(g)
	r.Reset()
	return r, nil
}

// LM is the model the runner evaluates.
func (r *SegmentRunner) LM() *LM { return r.lm }

// Reset forgets the memory: the next Step starts a new sequence.
func (r *SegmentRunner) Reset() {
	r.filled = 0
	for _, mv := range r.mems {
		segZero(mv)
	}
}

// Step runs one segment, ids being B rows of T tokens, and returns its
// logits [B*T, Vocab] (row-major, row b*T+i for token i of sequence b), as
// float64. The block inputs of the segment then become the memory of the
// next Step (the last M of all states seen since Reset).
func (r *SegmentRunner) Step(ids [][]int) ([]float64, error) {
	if len(ids) != r.B {
		return nil, errors.Errorf("segments: %d sequences, the runner has B=%d", len(ids), r.B)
	}
	for b, row := range ids {
		if len(row) != r.T {
			return nil, errors.Errorf("segments: sequence %d has %d tokens, the segment length is %d", b, len(row), r.T)
		}
		copy(r.ids[b*r.T:], row)
	}
	if r.M > 0 {
		mask := make([]float64, r.M+r.T)
		for j := range mask {
			if j >= r.M-r.filled {
				mask[j] = 1
			}
		}
		segSetFloats(r.mask, mask)
	}
	err := r.vm.RunAll()
	r.vm.Reset()
	if err != nil {
		return nil, errors.Wrap(err, "segments: run")
	}
	out := graph.ToFloat64s(*r.logits)
	for l, mv := range r.mems {
		if err := segShiftMemory(mv, r.hidden[l], r.B, r.M, r.T); err != nil {
			return nil, err
		}
	}
	r.filled = min(r.M, r.filled+r.T)
	return out, nil
}

// Run resets the memory and runs ids (B rows of equal length N, a multiple
// of T) segment by segment, returning the logits of each segment as Step
// does.
func (r *SegmentRunner) Run(ids [][]int) ([][]float64, error) {
	if len(ids) != r.B {
		return nil, errors.Errorf("segments: %d sequences, the runner has B=%d", len(ids), r.B)
	}
	n := len(ids[0])
	for b, row := range ids {
		if len(row) != n {
			return nil, errors.Errorf("segments: sequence %d has %d tokens, sequence 0 has %d", b, len(row), n)
		}
	}
	if n == 0 || n%r.T != 0 {
		return nil, errors.Errorf("segments: sequence length %d is not a positive multiple of the segment length %d", n, r.T)
	}
	r.Reset()
	out := make([][]float64, 0, n/r.T)
	seg := make([][]int, r.B)
	for s := 0; s < n; s += r.T {
		for b := range seg {
			seg[b] = ids[b][s : s+r.T]
		}
		lg, err := r.Step(seg)
		if err != nil {
			return nil, errors.Wrapf(err, "segment %d", s/r.T)
		}
		out = append(out, lg)
	}
	return out, nil
}

// Close releases the machine and the store's record of the runner's graph.
func (r *SegmentRunner) Close() error {
	r.p.Forget(r.g)
	return r.vm.Close()
}

// segShiftMemory sets mem [B, M, d] to the last M rows of concat(mem, hid)
// along axis 1, hid [B, T, d] (Transformer-XL's _update_mems).
func segShiftMemory(mem *tensor.Dense, hid G.Value, b, m, t int) error {
	if hid == nil {
		return errors.New("segments: block input was not read")
	}
	switch md := mem.Data().(type) {
	case []float64:
		hd, ok := hid.Data().([]float64)
		if !ok {
			return errors.Errorf("segments: block input is %T, memory []float64", hid.Data())
		}
		segShiftRows(md, hd, b, m, t)
	case []float32:
		hd, ok := hid.Data().([]float32)
		if !ok {
			return errors.Errorf("segments: block input is %T, memory []float32", hid.Data())
		}
		segShiftRows(md, hd, b, m, t)
	default:
		return errors.Errorf("segments: memory of type %T", md)
	}
	return nil
}

func segShiftRows[F float32 | float64](mem, hid []F, b, m, t int) {
	d := len(mem) / (b * m)
	for i := 0; i < b; i++ {
		mr := mem[i*m*d : (i+1)*m*d]
		hr := hid[i*t*d : (i+1)*t*d]
		if m <= t {
			copy(mr, hr[(t-m)*d:])
			continue
		}
		copy(mr, mr[t*d:]) // keep the newest m-t old states (overlapping copy is safe)
		copy(mr[(m-t)*d:], hr)
	}
}

func segZero(v *tensor.Dense) {
	switch d := v.Data().(type) {
	case []float64:
		clear(d)
	case []float32:
		clear(d)
	}
}

func segSetFloats(v *tensor.Dense, x []float64) {
	switch d := v.Data().(type) {
	case []float64:
		copy(d, x)
	case []float32:
		for i, f := range x {
			d[i] = float32(f)
		}
	}
}
