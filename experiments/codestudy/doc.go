// Package codestudy is the code study of this project (issue #14): a
// byte-level causal language model on Go source, trained once per position
// encoding, compares the 1-D encodings t5, alibi and rope, the
// tree-relative bias of posenc ("tree": a learnable bias per head for the
// (up, down) steps between two bytes' innermost syntax nodes through their
// lowest common ancestor), and the tree bias combined with a 1-D encoding
// ("tree+rope", "tree+alibi"), in bits per byte on held-out packages at 1×,
// 2× and 4× the training length. The command experiments/code is a thin
// wrapper around Run.
//
// # Data
//
// The corpus is gocode.LoadCorpus of a source root (GOROOT/src by default)
// with Plan.Corpus: split into train, validation and test by package
// directory, capped at Options.MaxBytes (8 MiB in the presets: 0.5 s to
// load and parse GOROOT/src's share on an idle core of the development
// machine, up to 1.6 s on a loaded one), relations clipped at MaxUp and
// MaxDown (4 and 4: 25 relation ids). A file that does not parse is skipped
// and counted, never a crash: the count is in the log, in every row
// (skipped_files), in results.json and in table.md. A root without Go files
// is gocode's error.
//
// # Task
//
// Task is a layers.LM over windows of L bytes drawn by gocode.Sampler
// (resumable: State and SetState) that trains through the project's engine,
// trainer.RunTask (kind "code"). Whether a model gets the tree relations is
// decided by the encoding's accepted kinds, not by its name (Pairwise: it,
// or a part of a combination, serves pairwise positions and not line
// positions; none serves every kind and needs none): such a model is built once
// with pairwise positions [B, L, L] carrying a posenc.Feed, and every batch
// binds its relations with Feed.Bind; the others get no positions and see
// the 1-D span (a combined encoding's 1-D part sees the span too).
// Checkpoints record the corpus hash (DataHash) and the relation bounds,
// comment handling and validation windows (TaskConfig); a checkpoint of
// others is refused.
//
// # Evaluation
//
// Anchors draws a fixed, seeded set of windows (file, end byte) from a
// split, uniformly over every position with room for the longest window.
// At every length f·L the window of an anchor ends at the anchor's byte, so
// the shorter windows are tails of the 4·L one: the same files and offsets
// family at every length, and the same windows for every encoding (test
// files shorter than 4L+1 bytes are never drawn). Evaluate scores both every
// target of each window (Result.BitsPerByte) and its last L targets
// (BitsPerByteLast: the same bytes at every length, so a change comes from
// the longer context only). Validation (the engine's) is the bits per byte
// on Plan.ValWindows validation windows of length L.
//
// # Plan
//
// A Plan lists the encodings (posenc names, "a+b" combinations or variants
// name@key=value), the seeds, the training configuration (BaseConfig: d =
// 64, 4 heads, 2 blocks, FFN 256, L = 128, batch 16), the corpus options,
// the factors and the window counts. Preset returns "quick" (one seed) and
// "full" (three seeds, longer training, more test windows).
//
// # Output and resumption
//
// Under the output directory (DefaultDir: runs/code/<preset>):
//
//	models/<label>-seed<s>/ckpt.safetensors  training checkpoint (+ ckpt.metrics.jsonl)
//	results/<label>-seed<s>.json             the rows of one model, with the spec they were computed under
//	results.csv, results.json                all rows (one per model x length)
//	table.md                                 bits per byte tables, training table, corpus and skipped files
//	bpb.png                                  bits per byte against the evaluation length
//
// Run skips models whose rows are saved under the same spec, resumes an
// interrupted training from its checkpoint, and re-renders. Each model is
// locked while it runs, and the rendered files while they are written.
//
// # Maps
//
// LoadModel reads a trained job's weights back (with its configuration and
// the corpus), and TreeBias returns a tree model's learned bias per head as
// a [MaxUp+1, MaxDown+1] matrix over (steps up, steps down), for drawing.
package codestudy
