package posenc

import (
	"fmt"
	"slices"
)

// Incremental decoding (layers.Decoder) runs one graph per model for every
// generated token: the new token's query at position M attends to a cache of
// M projected keys and values at positions 0..M-1 and to its own key at M.
// The positions inside the cache are re-indexed this way at every step, as
// StreamingLLM does (Xiao et al. 2023, "Efficient Streaming Language Models
// with Attention Sinks", Sec. 3.2): the graph, and every position constant
// of the encoding in it, is built once. The cache holds keys before any
// rotation, so RoPE and its scalings rotate the cached keys again at their
// cache positions each step (O(M·d) a step, no new graph).
//
// That is exact for an encoding whose attention depends on positions only
// through their differences: shifting every position by the same amount
// changes nothing but rounding. Those are the encodings below without a
// note. The others say why not (Info.NoDecode).
//
// Absolute tables (sinusoidal, learned) decode too: they are StepAdders,
// fed each new token's own position at run time; their attention has no
// position terms, so the cache's positions do not matter. Their cached keys
// carry the positions they were added at, so their cache cannot slide
// (NoSlideReason).
//
// CoPE decodes as it is: its position of key j counts the gates from j to
// the query, and the cache is right-aligned (empty slots, then sinks, then
// the latest keys), so no count crosses an empty slot; the slots' own
// scores are masked.
var decodeNotes = map[string]string{
	"cpe": "CPE's convolution reads the neighbouring tokens after every block",
}

// NoSlideReason is Info.NoSlide of the absolute tables (the StepAdders).
const NoSlideReason = "an absolute table gave every cached key the position it was added at; sliding the window would renumber them, so the whole context must fit the window"

// decodeTrue lists the encodings that decode with every token's true
// position, bound as real positions at each step (Info.DecodeTrue): FIRE
// normalises by the query's absolute position (Li et al. 2023, Eq. 4),
// not a difference, so the re-indexed cache would change it. Their cache
// cannot slide either (the kept keys would keep their true positions,
// which the re-indexed reference does not): NoSlide.
var decodeTrue = map[string]string{
	"fire": "FIRE normalises by the query's absolute position, so it decodes at true positions, which a sliding window would renumber; the whole context must fit the window",
}

// DecodeLimiter is an encoding that decodes exactly only with a window of
// at most MaxDecodeWindow tokens (layers.NewDecoder refuses a larger one
// with the reason).
type DecodeLimiter interface {
	MaxDecodeWindow() (w int, why string)
}

// MaxDecodeWindow implements DecodeLimiter for rope-dynamic: its base
// follows the largest position of the call once it passes the training
// length L, so a decoding graph of W > L tokens (its base that of W) and
// the recompute of a shorter context (the base of that length) differ;
// with W <= L both keep the plain base, sliding included. The other
// rotary encodings decode with any window (0).
func (e *Rope) MaxDecodeWindow() (int, string) {
	if e.name != RopeDynamic {
		return 0, ""
	}
	return e.TrainLen, fmt.Sprintf("rope-dynamic rescales the base once the context passes its training length %d, and every cached key's rotation with it", e.TrainLen)
}

// noDecode is Info.NoDecode of a registered encoding: empty for the line
// encodings that decode incrementally, the reason otherwise.
func noDecode(info Info) string {
	if r, ok := decodeNotes[info.Name]; ok {
		return r
	}
	if !slices.Contains(info.Positions, PosLine) {
		return "not a line encoding: a causal language model decodes only over a line"
	}
	return ""
}
