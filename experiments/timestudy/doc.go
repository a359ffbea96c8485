// Package timestudy is the time study of issue #15: it tests whether
// real-valued positions (the times of events) let a Transformer use a
// regularity that is fixed in time but not in token order, the survey's
// music example of two notes a bar apart. The command experiments/times is
// a thin wrapper around Run.
//
// # Sequences
//
// Generate draws music-like event sequences (SeqOptions; DefaultSeqOptions:
// bars of P = 16 time units, V = 16 tokens, p = 0.7). The first bar holds
// FirstMin..FirstMax new events; in every later bar each event of the
// previous bar is repeated at exactly its onset + P with the same token with
// probability p, and NewMin..NewMax new events are added at onsets drawn
// uniformly from the bar (on a grid of Tick = 1/1024 time units, so that
// "exactly P" is exact in float64 and float32, and distinct from the bar's
// other onsets) with uniform tokens. Events are in onset order. The time
// offset from a repeat to its source is always P; the index offset (the
// events between them) varies with how many events the bars hold
// (IndexOffsets). Sequences are functions of the seed: training batch k is
// drawn from a generator seeded with (Seed, k), validation and test
// sequence i from Stream(seed, i), so every model sees the same data and a
// resumed run the batches of an uninterrupted one.
//
// # Task
//
// A causal LM (layers.LM over V+1 ids, the last one BOS) predicts each
// event's token from the earlier ones (Layout): position i holds the token
// of event i-1 (BOS at 0) and predicts the token of event i. A model with
// index positions sees the span 0..T-1. A model with time positions gets
// posenc real positions with separate query and key times: as a query,
// position i sits at t_i, the onset of the event it predicts (which the
// model is told, as a musician knows when the next note falls); as a key,
// it sits at t_{i-1}, the onset of the event whose token it holds (BOS at
// t_0 - 2P, where no query's t_i - P can fall). The source m of a repeated
// event i is then the key at position m+1 <= i (visible to the causal
// mask) at relative time exactly -P: one head that attends to relative
// time -P and copies predicts every repeat exactly. An index model sees the
// same tokens without times; the source is at an index offset that depends
// on the bars, so it can at best guess it (an induction strategy, "the
// event after the repeat of x repeats the event after x", gets part of the
// way). New events are unpredictable for both (log2 V bits at best).
//
// Task implements trainer.Task and trainer.TaskConfigurer for the engine
// (trainer.RunTask, kind "times"). Its graph is built once; a time model's
// real positions carry a posenc.Feed and each batch's onsets are rebound
// with Feed.Bind. Whether an encoding may be given time positions is
// decided by posenc (RealServed: posenc.CheckKind with real positions),
// never by name; asking for time positions of an encoding that does not
// serve them is an error naming it. Checkpoints record the sequence
// options, the positions (index or time) and the validation sequences; a
// checkpoint of others is refused.
//
// # Evaluation
//
// Evaluate scores a model on held-out sequences at a length (their first
// n events: the sequences at T are the beginnings of those at 2T): the
// accuracy and bits on the repeated events, the bits per event over every
// event and the bits on the new ones.
//
// # Plan
//
// A Plan lists the entries (posenc names or variants, each with index
// positions, or with time positions when "@time" follows the name:
// "rope@time", "fire@time@fire-mlp-width=16"), the seeds, the training
// configuration (BaseConfig: d = 64, 4 heads, 2 blocks, FFN 128, T = 64
// events, batch 32), the sequences, the evaluation factors (1, 2) and the
// numbers of validation and test sequences. DefaultEncodings lists none, t5
// (a reference: integer buckets), alibi, rope, kerple-log, fire and dpb
// (one hidden layer, for cost) with index positions, and the time variant
// of each of alibi, rope, kerple-log, fire and dpb that serves real
// positions (posenc.Accepted). Preset returns "quick" (none, t5, alibi and
// rope, one seed) and "full" (every entry, three seeds, longer training).
//
// # Output and resumption
//
// Under the output directory (DefaultDir: runs/times/<preset>):
//
//	models/<label>-seed<s>/ckpt.safetensors  training checkpoint (+ ckpt.metrics.jsonl)
//	results/<label>-seed<s>.json             the rows of one model, with the spec they were computed under
//	results.csv, results.json                all rows (one per model x length)
//	table.md                                 accuracy and bits tables, training table
//	repeats.png                              accuracy on repeated events, index against time positions
//
// Run skips models whose rows are saved under the same spec, resumes an
// interrupted training from its checkpoint, and re-renders. Each model is
// locked while it runs, and the rendered files while they are written.
//
// # Maps
//
// LoadModel reads a trained job's weights back; Attention returns the
// attention of one block of a model over sequences, per head;
// SourceAttention the share of a repeat's attention on its source (the key
// one bar back) per head, SourceHead the head with the largest share, and
// AttentionByTime each head's attention mass by relative time;
// DrawSequence draws a sequence's events on a time axis with each repeat
// linked to its source.
package timestudy
