// Package layers builds the Transformer of this project as Gorgonia graph
// nodes: Linear, Embedding, LayerNorm, FeedForward, multi-head Attention, a
// pre-LayerNorm Block and the byte-level language model LM, all driven by one
// Config; and two encoders built of the same blocks: ViT, a classifier of
// image patches on their grid (issue #13), and GraphTransformer, a node or
// graph classifier over padded batches of graphs (Graphormer style; issue
// #14).
//
// Every constructor has the shape NewX(g, p, cfg) (*X, error): it creates the
// layer's parameters in the store p (graph.Params) under hierarchical names
// (block0/attn/wq, block1/ffn/w2, ln_f/gamma, head/w, ...) and their nodes in
// the graph g. Building the same model in a second graph from the same store
// shares the weights in place, which is how a model trained at length L is
// evaluated at 8L: another graph, the same Params.
//
// Shapes: activations are [B, T, d]; the LM takes token ids [B, T]
// (tensor.Int) and returns logits [B*T, Vocab]. Linear weights are stored
// input-major, [In, Out] (y = x W + b), the transpose of PyTorch's layout.
//
// Position encodings (package posenc) plug into attention through small hook
// interfaces: added to the input, a transform of q and k, terms added to the
// raw scores, a score scale, an additive score bias and value terms.
// Attention computes, per head,
//
//	softmax_mask((q.kᵀ + terms) * scale + bias) v + valueTerms
//
// and knows nothing about any particular encoding. The bias is added before
// the mask; the mask is applied inside the softmax, so a fully masked row
// gives zeros, never NaN.
//
// Positions beyond token order reach the hooks as posenc.Positions: a ViT
// gives its grid encodings the patches' (row, col); a GraphTransformer
// gives the graphs' pairwise spatial relations [B, N, N]; the LM takes
// per-example pairwise relations in Options.Pos (a code model's syntax-tree
// relations, for tree and tree+rope). With a posenc.Feed in the positions,
// one graph serves every batch (Feed.Bind rebinds the relations).
//
// Using a trained LM: Decoder generates one token per step against a
// key/value cache of every block (a sliding window with attention sinks
// once full; absolute tables get each token's own position, Options.StepPos),
// and SegmentRunner evaluates segment by segment with Transformer-XL's
// memory, for any encoding.
//
// Errors: constructors and Fwd methods return errors that name the layer and
// the shapes; nothing panics on bad shapes.
package layers
