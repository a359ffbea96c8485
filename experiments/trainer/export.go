package trainer

import (
	"encoding/json"
	"io"

	"github.com/nlpodyssey/safetensors"
	"github.com/pkg/errors"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/graph"
)

// ExportWeights writes the model weights of p to path as a plain
// safetensors file (no optimizer state, no checksum), atomically, mode
// 0644, in p's dtype (F32 or F64), with metadata "format"
// ("rpe-go/weights/v1"), "config" (the resolved cfg as JSON, the -config
// format) and "provenance" (ProvenanceInfo as JSON). Non-finite weights are
// refused.
//
// Tensor names are the parameter names of package layers, which are also
// the names the PyTorch reference testdata/golden/gen_golden.py uses, with
// the same shapes (x @ W convention: a torch.nn.Linear holding W has
// weight = W.T):
//
//	tok_emb                  [V, d]      token embedding
//	block<i>/ln1/gamma, beta [d]         pre-attention LayerNorm
//	block<i>/attn/wq, wk, wv [d, d]      projections, x @ W + b
//	block<i>/attn/bq, bk, bv [d]
//	block<i>/attn/wo, bo     [d, d], [d] output projection
//	block<i>/ln2/gamma, beta [d]         pre-FFN LayerNorm
//	block<i>/ffn/w1, b1      [d, ffn], [ffn]  up projection (GELU tanh)
//	block<i>/ffn/w2, b2      [ffn, d], [d]    down projection
//	ln_f/gamma, beta         [d]         final LayerNorm
//	head/w                   [d, V]      output head, no bias
//
// plus the position encoding's parameters (package posenc; e.g. pos_emb
// [MaxLen, d] for "learned", t5_bias [T5Buckets, H] for "t5"), listed with
// their shapes by `go run ./experiments/checkpoint info`.
func ExportWeights(path string, p *graph.Params, cfg Config) error {
	pdt := safetensors.F32
	if p.Dtype() == tensor.Float64 {
		pdt = safetensors.F64
	}
	views := map[string]tensorView{}
	data := map[string][]float64{}
	for _, n := range p.Names() {
		info, _ := p.Info(n)
		d := p.Float64s(n)
		data[n] = d
		views[n] = encode(pdt, info.Shape, d)
	}
	if err := finite("weight", data); err != nil {
		return errors.WithMessagef(err, "export %s: refusing non-finite weights", path)
	}
	c, err := json.Marshal(cfg.Resolved())
	if err != nil {
		return errors.Wrapf(err, "export %s", path)
	}
	prov, _ := json.Marshal(Provenance())
	meta := map[string]string{"format": "rpe-go/weights/v1", "config": string(c), "provenance": string(prov)}
	return writeAtomic(path, func(w io.Writer) error { return safetensors.SerializeToWriter(views, meta, w) }, "export")
}
