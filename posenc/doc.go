// Package posenc implements the position encodings of Transformer attention
// as symbolic Gorgonia graph nodes.
//
// An encoding is a small type that implements one or more hook interfaces,
// grouped by where it acts (attention in package layers asks for the hooks and
// knows no encoding by name):
//
//	InputAdder     added to the token embeddings        [B, T, d]
//	QKTransformer  transforms q and k                    [B, H, T, dh] each
//	ScoreTermer    content-position terms on q.kᵀ        [B, H, Tq, Tk]
//	QueryBiasTermer a ScoreTermer whose terms are a bias on the queries plus
//	               terms of q only (xl's u): against a key/value cache,
//	               attention computes (q+b)·kᵀ, reading the keys once  [H, dh]
//	Scaler         replaces the 1/sqrt(dh) score scale
//	ScoreBiaser    content-free additive score bias      [B|1, H|1, Tq, Tk]
//	ValueTermer    terms added to the attention output   [B, H, Tq, dh]
//	AfterBlocker   transforms the hidden states between blocks [B, T, d]
//	StreamAttender computes the streaming attention itself  [B, T, H*dv]
//	               (layers' Stream; cope, whose gates a table bias cannot express,
//	               and fire, whose table over (distance, query) pairs grows as T²)
//	StepAdder      an InputAdder indexed by run-time positions (decoding) [B, 1, d]
//	ClassTokenAdder an InputAdder that also embeds a class token (layers.ViT) [B, 1, d]
//	DecodeLimiter  the largest window it decodes exactly with (rope-dynamic)
//
// Incremental decoding (layers.Decoder) re-indexes the cache at every step
// (see decode.go); Info.NoDecode, Info.NoSlide and Info.DecodeTrue say how
// each encoding takes part, and the conformance harness checks every one
// that declares decoding against a full recompute.
//
// Positions are explicit: a Span places query i at QStart+i and key j at
// KStart+j, so cross-attention (Tq != Tk), memory segments and offsets need no
// special case. Relative distances follow one convention unless a paper's
// own is documented on the type: rel = key position - query position.
//
// # Positions beyond a line
//
// A Site may also carry Positions (Site.Pos), data that the hooks read
// instead of the Span's indices:
//
//	PosLine      1-D integer positions (the Span; Site.Pos nil)      text
//	PosGrid      N-D integer coordinates shared by the batch         image patches (row, col)
//	PosReal      real-valued positions, shared or per example        times
//	PosPairwise  a relation per (query, key) pair, shared or per     graph distances, tree relations
//	             example
//
// An encoding lists the kinds it serves (PositionAccepter; line only if it
// does not say), the registry records them (Info.Positions, TrainableOn),
// and attention checks the kind before any hook runs: CheckKind's error
// names the encoding and both kinds. Biases may differ per example:
// ScoreBias may return [B|1, H|1, Tq, Tk]. The 2-D encodings of image
// patches (learned-2d, sinusoidal-2d, swin, swin-log, alibi-2d, rope-2d,
// rope-mixed, cpe) serve PosGrid; layers.ViT gives them the (row, col) of
// every patch, and gives the 1-D encodings the raster order.
//
// A bias that is a lookup into a small per-head table (T5, swin, swin-log,
// alibi-2d) is a TableBiaser: besides the whole [Tq, Tk] bias it gives the
// table and the host indices of any Tile of the score matrix, and TileBias
// builds the bias of one tile, so that a tiled attention kernel can compute
// scores block by block without materialising [Tq, Tk]. The conformance
// harness checks that every tile equals the matching block of ScoreBias.
// The encodings with content-position terms shaw, xl and deberta are
// StreamTermers: StreamTerms gives their terms as tables [R, H*dh] or
// [R, dh] looked up by host rows per tile (graph.StreamTerm: Shaw's key and
// value embeddings, XL's (q+v)·P[i-j] and u·k, DeBERTa's c2p and p2c), so
// that graph.StreamAttention computes them without a [Tq, R] or [Tq, Tk]
// tensor (StreamTermsOf; the harness checks Stream on = Stream off).
// AfterBlocker is the hook of encodings that act between blocks (cpe).
//
// Encodings of pairwise positions (structure, KindStructural):
// graphormer-spatial and graphormer-centrality (GraphormerSpatial and
// GraphormerCentrality, Ying et al. 2021) and LaplacianInput (Dwivedi &
// Bresson 2020, a per-node input, not an encoding) for graphs, tree
// (TreeRel) for syntax trees (Zügner et al. 2021; Shiv & Quirk 2019). New
// also builds any combination of registered names joined by CombineSep
// ("tree+rope": NewCombined of the parts), each part receiving the
// positions it serves (a 1-D part of a tree-biased LM sees the token
// order); InfoOf describes combinations too.
//
// Per-example relations change with every batch. Built plainly, they enter
// the graph as constants (a new graph per batch); with a Feed in the
// positions (Positions.Feed) the encodings read them from tensor.Int input
// nodes instead (graph.TableBias for table biases, degree ids for the
// centrality encoding), and Feed.Bind(next) refills those nodes before a
// run, so one graph serves every batch of the same shape.
//
// Real positions (NewReal(batch, qTimes, kTimes): event times, per example
// or shared by the batch; queries and keys may sit at different times, e.g.
// a next-event model's query i at the time of the event it predicts and
// its key at the time of its own token) are served by alibi, rope (rope-pi,
// rope-ntk and rope-llama3 too; rope-dynamic and rope-yarn refuse them),
// kerple-log, kerple-power, fire and dpb, with the formulas of their types
// on the times instead of the indices. Host data derived from the times
// (ALiBi's bias, RoPE's angles, the time differences) is a constant cached
// per positions Key, or with a Feed a float input node of the graph's
// dtype refilled by Feed.Bind. Per-example times give biases [B, H, Tq,
// Tk]; KERPLE's kernels and the MLPs of fire and dpb then run on every
// (example, query, key) pair. The causal mask stays by index; a causal
// ALiBi site whose visible keys are later than their query is an error,
// and so is a negative query time for fire. FIRE is the one of them that
// is not translation-invariant in time.
//
// Fixed buffers (sinusoid tables, slopes, bucket indices) are computed on the
// host, cached per span in one mutex-guarded cache type shared by every
// encoding (cache.go), and enter graphs as constants; only learnable tables
// are parameters (created in the site's graph.Params, never decayed). An
// encoding value may build graphs from several goroutines at once (each with
// its own graph.Params), and the zero value of every encoding type with its
// size fields set (&Sinusoidal{}, &Alibi{}, &T5{NumBuckets: 32, MaxDistance:
// 128}) is ready to use.
//
// # DeBERTa and Hugging Face DeBERTa-v2/v3
//
// The deberta encoding is HF's modeling_deberta_v2 disentangled attention
// with share_att_key = true and pos_att_type = ["p2c", "c2p"] (both fixed,
// as in deberta-v3-base), no absolute position input
// (position_biased_input = false) and no LayerNorm on the relative table
// (HF's norm_rel_ebd = "layer_norm" is not modelled). Its two sizes are
// Options fields with defaults scaled to the reference model (64-token
// windows, d = 128) instead of deberta-v3-base's 512-token ones:
// DebertaBuckets 32 (HF position_buckets 256) and DebertaMaxPosition 128
// (HF max_relative_positions -1, i.e. max_position_embeddings 512). The
// DeBERTa type's documentation gives the reasons.
//
// Encodings are created by name with New; Names lists the valid names
// (sorted), Registered describes each (kind, learnable, evaluation-only
// variant of which base, positions served) in the table order none,
// sinusoidal, learned, shaw, shaw-scalar, t5, xl, deberta, rope, alibi,
// kerple-log, kerple-power, sandwich, fire, dpb, xpos, cope, rope-pi, rope-ntk,
// rope-dynamic, rope-yarn, rope-llama3, learned-2d, sinusoidal-2d, swin,
// swin-log, alibi-2d, rope-2d, rope-mixed, cpe, graphormer-spatial,
// graphormer-centrality, tree; Trainable lists the
// names a model can be trained with and TrainableOn(kind) those serving a
// kind of positions. Derive lists of encodings from these rather than keeping
// them by hand.
package posenc
