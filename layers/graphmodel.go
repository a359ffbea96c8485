package layers

import (
	"fmt"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/posenc"
)

// GraphConfig is the configuration of the graph Transformer.
type GraphConfig struct {
	// Encoder is the Transformer: DModel, Heads, Layers, FFN, Eps, InitStd,
	// Pos, PosOpts and Stream as for the LM. Vocab is unused and Causal
	// must be false (every node attends to every node). Encoder.Stream
	// (config key stream) computes every block's attention with
	// graph.StreamAttention, in tiles of keys without a [B, H, T, T]
	// tensor; the spatial bias streams as a table lookup with per-example
	// rows, read from the relations bound through a posenc.Feed, and
	// Fwd's padding mask, rebound per batch, is read each time the graph
	// runs (graph.StreamOpts.KeyPad).
	Encoder Config
	// Features is the number of input features per node, Classes the
	// number of classes.
	Features, Classes int
	// PerNode classifies every node (logits [B*N, Classes]); otherwise
	// each graph (logits [B, Classes]).
	PerNode bool
	// Regression makes the head's Classes outputs real-valued predictions
	// (Classes >= 1; 1 for one target per graph, such as a molecule's
	// property) instead of logits; the model is the same, the loss is the
	// caller's.
	Regression bool
	// LapK > 0 adds the Laplacian positional input of K eigenvectors per
	// node (posenc.LaplacianInput, parameters lap_proj/w and lap_proj/b).
	LapK int
	// VirtualNode prepends a learnable graph token (Graphormer's
	// [VNode]) that attends to and is attended by every node.
	VirtualNode bool
	// MaxNodes is the largest graph the model accepts (0: no limit); Fwd
	// refuses a larger N with an error naming both.
	MaxNodes int
}

// DefaultGraphConfig is a small graph classifier: d = 64, 4 heads, 3
// blocks, FFN 128, one input feature, per-node classes, no position
// encoding, no Laplacian input, no virtual node.
func DefaultGraphConfig(classes int) GraphConfig {
	e := DefaultConfig()
	e.Vocab, e.DModel, e.Heads, e.Layers, e.FFN, e.Causal = 0, 64, 4, 3, 128, false
	return GraphConfig{Encoder: e, Features: 1, Classes: classes, PerNode: true}
}

// Validate reports the first inconsistency in c.
func (c GraphConfig) Validate() error {
	e := c.Encoder
	e.Vocab = 1 // unused
	if err := e.Validate(); err != nil {
		return err
	}
	switch {
	case c.Encoder.Causal:
		return errors.New("graph transformer: the encoder must not be causal")
	case c.Features <= 0:
		return errors.Errorf("graph transformer: %d features per node, must be positive", c.Features)
	case c.Regression && c.Classes < 1:
		return errors.Errorf("graph transformer: %d regression outputs, need at least 1", c.Classes)
	case !c.Regression && c.Classes < 2:
		return errors.Errorf("graph transformer: %d classes, need at least 2", c.Classes)
	case c.LapK < 0:
		return errors.Errorf("graph transformer: Laplacian size %d is negative", c.LapK)
	case c.MaxNodes < 0:
		return errors.Errorf("graph transformer: maximum graph size %d is negative", c.MaxNodes)
	}
	return nil
}

// String describes the model in one line.
func (c GraphConfig) String() string {
	e := c.Encoder
	pos := e.Pos
	if pos == "" {
		pos = "none"
	}
	head := "per-graph"
	if c.PerNode {
		head = "per-node"
	}
	if c.Regression {
		head += " regression"
	}
	return fmt.Sprintf("graph-transformer pos=%s lap=%d virtual=%v d=%d heads=%d layers=%d ffn=%d features=%d classes=%d %s",
		pos, c.LapK, c.VirtualNode, e.DModel, e.Heads, e.Layers, e.FFN, c.Features, c.Classes, head)
}

// GraphTransformer is a Transformer over the nodes of graphs, in the style
// of Graphormer (Ying et al. 2021, "Do Transformers Really Perform Bad for
// Graph Representation?") and of the graph Transformer of Dwivedi & Bresson
// 2020 ("A Generalization of Transformer Networks to Graphs"), read top to
// bottom:
//
//	x = X · W_in + b_in                       // [B, N, d]    node_in: node features
//	x = x + Lap · W_lap + b_lap  (LapK > 0)   // [B, N, d]    lap_proj: Laplacian eigenvectors (Dwivedi & Bresson)
//	x = [v; x]                   (VirtualNode)// [B, N+1, d]  virtual_token: a learnable graph token first
//	x = x + PE (input hook, if any)           // centrality (degree) embedding, Graphormer
//	x = Block_l(x)                            // pre-LN blocks, bidirectional, padding keys masked;
//	                                          // spatial bias per head and distance (Graphormer) in every block
//	y = LN_f(x)
//	per node:  logits = y · W_head + b_head   // [B*N, Classes]  (the virtual token dropped)
//	per graph: logits = pool(y) · W_head + b  // [B, Classes]    mean over real nodes, or the virtual token
//
// The encoding receives the pairwise positions given to Fwd (a graph's
// spatial relations, experiments/graphdata), with the virtual token's
// relation added by posenc.WithVirtualNode when VirtualNode is set; pass a
// Positions value with a posenc.Feed to rebind them per batch without
// rebuilding the graph (SitePositions gives what to bind). Parameters:
// node_in/w, node_in/b, lap_proj/w, lap_proj/b, virtual_token, block<l>/...,
// ln_f, head/w, head/b, plus the encoding's (spatial_bias,
// centrality_emb).
type GraphTransformer struct {
	Cfg     GraphConfig
	Pos     posenc.Encoding
	In      *Linear
	Virtual *G.Node // [1, d], nil without VirtualNode
	Blocks  []*Block
	LNF     *LayerNorm
	Head    *Linear
	g       *G.ExprGraph
	p       *graph.Params
}

// NewGraphTransformer creates the model's parameters in p (or reuses them)
// and their nodes in g. It returns cfg.Validate's error, or the encoding's
// for an unknown name or bad options.
func NewGraphTransformer(g *G.ExprGraph, p *graph.Params, cfg GraphConfig) (*GraphTransformer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Encoder.noClassToken("graph transformer"); err != nil {
		return nil, err
	}
	pos, err := newPositionEncoding(cfg.Encoder)
	if err != nil {
		return nil, err
	}
	m := &GraphTransformer{Cfg: cfg, Pos: pos, g: g, p: p}
	d, std := cfg.Encoder.DModel, cfg.Encoder.InitStd
	if m.In, err = NewLinear(g, p, LinearConfig{Name: "node_in", In: cfg.Features, Out: d, Bias: true, InitStd: std}); err != nil {
		return nil, err
	}
	if cfg.VirtualNode {
		if m.Virtual, err = p.Node(g, "virtual_token", tensor.Shape{1, d}, graph.Normal(std), false); err != nil {
			return nil, err
		}
	}
	if m.Blocks, m.LNF, err = newStack(g, p, cfg.Encoder, pos); err != nil {
		return nil, err
	}
	if m.Head, err = NewLinear(g, p, LinearConfig{Name: "head", In: d, Out: cfg.Classes, Bias: true, InitStd: std}); err != nil {
		return nil, err
	}
	return m, nil
}

// SitePositions returns the positions the model gives its encoding for
// node positions pos (pairwise, N x N): pos itself, or with VirtualNode
// posenc.WithVirtualNode(pos) (N+1 tokens, the graph token first) carrying
// pos's Feed. A caller that rebinds a Feed per batch binds
// SitePositions(next). nil stays nil.
func (m *GraphTransformer) SitePositions(pos *posenc.Positions) (*posenc.Positions, error) {
	if pos == nil || !m.Cfg.VirtualNode {
		return pos, nil
	}
	vp, err := posenc.WithVirtualNode(pos)
	if err != nil {
		return nil, errors.WithMessage(err, "graph transformer")
	}
	vp.Feed = pos.Feed
	return vp, nil
}

// MaskValue returns the value of Fwd's mask input for valid [B][N] (true
// for real nodes, as graphdata.Batch.Valid): [B, N], 1 for real nodes and
// 0 for padding, in the dtype of the model's parameters. It returns an
// error for an empty batch, rows of different lengths, or a graph without
// a real node.
func (m *GraphTransformer) MaskValue(valid [][]bool) (*tensor.Dense, error) {
	if len(valid) == 0 || len(valid[0]) == 0 {
		return nil, errors.New("graph transformer: empty mask: no graphs or no nodes")
	}
	n := len(valid[0])
	v := make([]float64, len(valid)*n)
	for b, row := range valid {
		if len(row) != n {
			return nil, errors.Errorf("graph transformer: mask row %d has %d nodes, row 0 has %d", b, len(row), n)
		}
		real := 0
		for i, ok := range row {
			if ok {
				v[b*n+i] = 1
				real++
			}
		}
		if real == 0 {
			return nil, errors.Errorf("graph transformer: graph %d of the batch is empty (no real node)", b)
		}
	}
	return graph.FromFloat64s(m.p.Dtype(), tensor.Shape{len(valid), n}, v), nil
}

// Fwd maps node features x [B, N, Features] to logits: [B*N, Classes] per
// node (row b*N+i is node i of graph b; padding rows are there too, to be
// ignored by the loss with label -1), or [B, Classes] per graph.
//
// pos holds the pairwise relations of the nodes (TQ == TK == N, per
// example or shared; graphdata.Batch.Positions); nil is allowed only for
// an encoding that serves line positions (none). mask is nil (every node
// real) or a float node [B, N] (1 real node, 0 padding; MaskValue):
// padding nodes are masked as keys in every block and left out of the
// per-graph mean. lapPE is the
// Laplacian input [B, N, LapK] when LapK > 0 and must be nil otherwise.
//
// It returns an error naming the problem for inputs of the wrong shape,
// more nodes than MaxNodes ("graphs have 70 nodes, the configured maximum
// is 64"), positions that do not fit N nodes or that the encoding cannot
// serve, or a missing or unexpected lapPE.
func (m *GraphTransformer) Fwd(x *G.Node, pos *posenc.Positions, mask, lapPE *G.Node) (*G.Node, error) {
	return m.FwdPairMask(x, pos, mask, nil, lapPE)
}

// FwdPairMask is Fwd with a pairwise attention mask: pairMask is nil (as
// Fwd) or a float node [B, N, N] (1: query node i may attend to key node
// j, 0: blocked, as -inf added to the score), multiplied with the key mask
// of mask. Graphormer's collator masks unreachable pairs (nodes of
// different components) this way; rows of padding queries should allow
// the real keys (as Graphormer's do), so that no real row is empty. With
// VirtualNode the graph token attends to and is attended by every node.
// The streaming attention (Encoder.Stream) takes no pairwise mask: an
// error.
func (m *GraphTransformer) FwdPairMask(x *G.Node, pos *posenc.Positions, mask, pairMask, lapPE *G.Node) (*G.Node, error) {
	const name = "graph transformer"
	sh := x.Shape()
	if sh.Dims() != 3 || sh[2] != m.Cfg.Features {
		return nil, errors.Errorf("%s: node features have shape %v, want [B, N, %d]", name, sh, m.Cfg.Features)
	}
	b, n, d := sh[0], sh[1], m.Cfg.Encoder.DModel
	if b < 1 || n < 1 {
		return nil, errors.Errorf("%s: empty input %v: no graphs or no nodes", name, sh)
	}
	if m.Cfg.MaxNodes > 0 && n > m.Cfg.MaxNodes {
		return nil, errors.Errorf("%s: graphs have %d nodes, the configured maximum is %d", name, n, m.Cfg.MaxNodes)
	}
	if pos != nil {
		if pos.Kind != posenc.PosPairwise {
			return nil, errors.Errorf("%s: node positions are %s, want pairwise relations between the %d nodes", name, pos.Describe(), n)
		}
		if err := pos.Check(b, n, n); err != nil {
			return nil, errors.WithMessagef(err, "%s: node positions", name)
		}
	}
	if mask != nil {
		if ms := mask.Shape(); ms.Dims() != 2 || ms[0] != b || ms[1] != n {
			return nil, errors.Errorf("%s: mask has shape %v, want [%d, %d]", name, ms, b, n)
		}
	}
	if pairMask != nil {
		if ms := pairMask.Shape(); ms.Dims() != 3 || ms[0] != b || ms[1] != n || ms[2] != n {
			return nil, errors.Errorf("%s: pairwise mask has shape %v, want [%d, %d, %d]", name, ms, b, n, n)
		}
		if m.Cfg.Encoder.Stream {
			return nil, errors.Errorf("%s: the streaming attention takes no pairwise mask", name)
		}
	}
	switch {
	case m.Cfg.LapK > 0 && lapPE == nil:
		return nil, errors.Errorf("%s: the model takes a Laplacian input of %d eigenvectors; lapPE is nil", name, m.Cfg.LapK)
	case m.Cfg.LapK == 0 && lapPE != nil:
		return nil, errors.Errorf("%s: lapPE given but the model has LapK 0", name)
	case lapPE != nil:
		if ls := lapPE.Shape(); ls.Dims() != 3 || ls[0] != b || ls[1] != n || ls[2] != m.Cfg.LapK {
			return nil, errors.Errorf("%s: lapPE has shape %v, want [%d, %d, %d]", name, ls, b, n, m.Cfg.LapK)
		}
	}
	sp, err := m.SitePositions(pos)
	if err != nil {
		return nil, err
	}
	if err := posenc.CheckKind(m.Pos, sp); err != nil {
		return nil, errors.WithMessage(err, name)
	}

	h, err := m.In.Fwd(x) // [B, N, d]
	if err != nil {
		return nil, err
	}
	if lapPE != nil {
		if h, err = posenc.LaplacianInput(m.g, m.p, "lap_proj", h, lapPE, m.Cfg.Encoder.InitStd); err != nil { // [B, N, d]
			return nil, err
		}
	}
	t := n // tokens
	keyMask := mask
	if m.Cfg.VirtualNode {
		t = n + 1
		v, err := graph.Embedding(m.Virtual, m.constInts("virtual_ids", []int{b, 1}, make([]int, b))) // [B, 1, d]
		if err != nil {
			return nil, err
		}
		if h, err = graph.Concat(1, v, h); err != nil { // [B, N+1, d]
			return nil, errors.Wrap(err, name+": virtual token")
		}
		if mask != nil {
			ones := m.constFloats("virtual_mask", tensor.Shape{b, 1}, 1)
			if keyMask, err = graph.Concat(1, ones, mask); err != nil { // [B, N+1]
				return nil, errors.Wrap(err, name+": mask")
			}
		}
	}
	var attnMask *G.Node
	if keyMask != nil {
		if attnMask, err = graph.Reshape(keyMask, b, 1, 1, t); err != nil { // [B, 1, 1, T]
			return nil, err
		}
	}
	if pairMask != nil {
		pm := pairMask
		if m.Cfg.VirtualNode { // the graph token's row and column attend everywhere
			if pm, err = graph.Concat(2, m.constFloats("virtual_pair_col", tensor.Shape{b, n, 1}, 1), pm); err != nil { // [B, N, T]
				return nil, errors.Wrap(err, name+": pairwise mask")
			}
			if pm, err = graph.Concat(1, m.constFloats("virtual_pair_row", tensor.Shape{b, 1, t}, 1), pm); err != nil { // [B, T, T]
				return nil, errors.Wrap(err, name+": pairwise mask")
			}
		}
		if pm, err = graph.Reshape(pm, b, 1, t, t); err != nil { // [B, 1, T, T]
			return nil, err
		}
		if attnMask == nil {
			attnMask = pm
		} else if attnMask, err = graph.BroadcastMul(pm, attnMask); err != nil { // [B, 1, T, T]
			return nil, errors.Wrap(err, name+": pairwise mask")
		}
	}
	flat, err := encode(m.g, m.p, m.Cfg.Encoder, m.Pos, m.Blocks, m.LNF, h, sp, attnMask) // [B*T, d]
	if err != nil {
		return nil, err
	}
	if m.Cfg.PerNode {
		if m.Cfg.VirtualNode { // drop the graph tokens: rows b*(N+1)+1+i
			rows := make([]int, 0, b*n)
			for bb := 0; bb < b; bb++ {
				for i := 0; i < n; i++ {
					rows = append(rows, bb*t+1+i)
				}
			}
			if flat, err = graph.Embedding(flat, m.constInts("node_rows", []int{b * n}, rows)); err != nil { // [B*N, d]
				return nil, err
			}
		}
		return m.Head.Fwd(flat) // [B*N, Classes]
	}
	var pooled *G.Node
	if m.Cfg.VirtualNode { // the graph token: rows b*(N+1)
		rows := make([]int, b)
		for bb := range rows {
			rows[bb] = bb * t
		}
		if pooled, err = graph.Embedding(flat, m.constInts("graph_rows", []int{b}, rows)); err != nil { // [B, d]
			return nil, err
		}
	} else {
		if pooled, err = m.meanPool(flat, mask, b, n, d); err != nil { // [B, d]
			return nil, err
		}
	}
	return m.Head.Fwd(pooled) // [B, Classes]
}

// meanPool averages y [B*N, d] over the real nodes of each graph (mask
// [B, N], or every node when mask is nil): [B, d].
func (m *GraphTransformer) meanPool(y, mask *G.Node, b, n, d int) (*G.Node, error) {
	y3, err := graph.Reshape(y, b, n, d) // [B, N, d]
	if err != nil {
		return nil, err
	}
	var w *G.Node // [B, 1, N], each row summing to 1
	if mask == nil {
		w = m.constFloats("pool_weights", tensor.Shape{b, 1, n}, 1/float64(n))
	} else {
		cnt, err := G.Sum(mask, 1) // [B]
		if err != nil {
			return nil, errors.Wrap(err, "graph transformer: pooling")
		}
		inv, err := G.Inverse(cnt) // [B]
		if err != nil {
			return nil, errors.Wrap(err, "graph transformer: pooling")
		}
		if inv, err = graph.Reshape(inv, b, 1); err != nil { // [B, 1]
			return nil, err
		}
		if w, err = graph.BroadcastMul(mask, inv); err != nil { // [B, N]
			return nil, err
		}
		if w, err = graph.Reshape(w, b, 1, n); err != nil { // [B, 1, N]
			return nil, err
		}
	}
	pooled, err := G.BatchedMatMul(w, y3) // [B, 1, d]
	if err != nil {
		return nil, errors.Wrap(err, "graph transformer: pooling")
	}
	return graph.Reshape(pooled, b, d)
}

// constInts is a constant tensor.Int node of the given shape and values.
func (m *GraphTransformer) constInts(name string, shape []int, v []int) *G.Node {
	return G.NewTensor(m.g, tensor.Int, len(shape), G.WithShape(shape...), G.WithName(graph.UniqueName(m.g, name)),
		G.WithValue(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))))
}

// constFloats is a constant node of the parameters' dtype filled with v.
func (m *GraphTransformer) constFloats(name string, shape tensor.Shape, v float64) *G.Node {
	data := make([]float64, shape.TotalSize())
	for i := range data {
		data[i] = v
	}
	dt := m.p.Dtype()
	return G.NewTensor(m.g, dt, len(shape), G.WithShape(shape...), G.WithName(graph.UniqueName(m.g, name)),
		G.WithValue(graph.FromFloat64s(dt, shape, data)))
}

// Learnables returns every parameter node of the model in its graph, the
// position encoding's included, sorted by name.
func (m *GraphTransformer) Learnables() G.Nodes { return m.p.Nodes(m.g) }

// Probes returns the attention probe of each block, in order (see
// Attention.Probe and graph.AttentionProbe).
func (m *GraphTransformer) Probes() []*graph.AttentionProbe { return blockProbes(m.Blocks) }
