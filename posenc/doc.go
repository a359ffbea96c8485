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
//	Scaler         replaces the 1/sqrt(dh) score scale
//	ScoreBiaser    content-free additive score bias      [H|1, Tq, Tk]
//	ValueTermer    terms added to the attention output   [B, H, Tq, dh]
//
// Positions are explicit: a Span places query i at QStart+i and key j at
// KStart+j, so cross-attention (Tq != Tk), memory segments and offsets need no
// special case. Relative distances follow one convention unless a paper's
// own is documented on the type: rel = key position - query position.
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
// variant of which base) in the table order none, sinusoidal, learned, shaw,
// shaw-scalar, t5, xl, deberta, rope, alibi, rope-pi, rope-ntk,
// rope-dynamic, rope-yarn, and Trainable lists the names a model can be
// trained with. Derive lists of encodings from these rather than keeping
// them by hand.
package posenc
