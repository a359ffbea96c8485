// Package extrapstudy is the length-extrapolation study: the source
// documents' headline experiment (train at L, evaluate at 2L, 4L, 8L) as a
// reproducible, resumable run on the study framework (package study: one
// study.Jobs job per trained model). The command experiments/extrapolation
// is a thin wrapper around Run, RunJob and Render.
//
// # Plan
//
// A Plan lists the trained encodings, the seeds, the training configuration
// (trainer.Config), the evaluation lengths Le = f·L and the RoPE scalings.
// Preset returns the built-in plans: "quick" (a reduced study of 6
// encodings, one seed and 150 updates) and "full" (every trainable encoding
// of posenc plus FullVariants, the reference 2000-update training, 3
// seeds). Plan.Validate checks the plan and the corpus before anything is
// trained.
//
// # Variants
//
// A plan entry may override options of the training configuration:
// "name@key=value@key=value", the keys being the internal/fields names of
// trainer.Config, e.g. "t5@t5-max-distance=64" or
// "sinusoidal@sinusoidal-scale=1" (ParseVariant). The entry's canonical
// label (Variant.Label) names it in tables, plots, rows ("encoding") and
// files ("<label>-seed<s>"); rows also carry the base encoding, the
// overrides and the resolved position options.
//
// # Protocols
//
// Every model is scored on the same evaluation text, the first k·Lmax+1
// bytes of the validation split (Plan.EvalText), cut into non-overlapping
// windows of Le bytes:
//
//	(a) ProtocolAll   every target of every window is scored;
//	(b) ProtocolLast  only the last L targets of each window are scored, so
//	                  each has at least Le-L bytes of context: a longer
//	                  window can only help, and any loss comes from
//	                  positions beyond those seen in training.
//
// ScoreWindows computes both from one forward pass. A learned absolute table
// cannot run beyond L: its cells are n/a (status StatusNA) and the study
// goes on. The trained "rope" model is also evaluated at Le > L with the
// evaluation-time scalings rope-pi, rope-ntk, rope-dynamic and rope-yarn
// (RopeScale = Le/L, RopeTrainLen = L), without retraining.
//
// # Measurements
//
// Per model: training ms per update and tokens/s (time spent in updates),
// evaluation ms per token at every length, and the peak Go heap (sampled
// runtime.MemStats.HeapAlloc) and process RSS (VmHWM after a reset, or
// sampled VmRSS) while a first batch is scored at the longest length, on a
// separate pass with GOGC=10 (MeasureMemory) so that the heap tracks the
// live memory and the timed pass runs with the default GC. The rows also
// keep the heap and RSS when that measurement began (base_heap_mb,
// base_rss_mb); the long-text protocol table shows the peak minus it: what
// scoring added beyond the model, the text and the rest of the process.
//
// # Statistics
//
// table.md has, per protocol, the paired comparisons of the best encoding
// of each length against every other (over seeds, and over seeds and
// evaluation windows), and, for the presets with a written reading (full,
// long, bible, bible-large), "Contrasts of the reading": each comparison
// the reading makes (readingContrasts), with its interval.
//
// # Output and resumption
//
// Under the output directory (DefaultDir: runs/extrapolation/<preset>),
// the framework's layout (study.Jobs):
//
//	models/<enc>-seed<s>/ckpt.safetensors  training checkpoint (and its metrics log)
//	models/<enc>-seed<s>/job.lock          held while the job runs
//	results/<enc>-seed<s>.json             the rows of the model job (every
//	                                       evaluation of that model), its spec
//	                                       and the checkpoint's SHA-256
//	results.csv, results.json              all rows (one per encoding x seed
//	                                       x length x protocol)
//	table.md                               Markdown tables
//	bpb_all.png, bpb_last-L.png            bits per byte against Le: every
//	                                       encoding, and a zoom on those
//	                                       within 0.1 of their value at L
//
// Checkpoints and rows are saved as they are produced; Run reuses the jobs
// whose saved rows hold (same configuration, corpus, evaluation text and
// evaluations; the checkpoint, if present, the one they came from),
// resumes an interrupted training from its checkpoint (the resumed run
// reproduces the uninterrupted one exactly), and a finished study only
// re-renders. Rows of another configuration whose checkpoint is still there
// are refused before anything runs (-fresh, -redo or another -out). A
// checkpoint that fails to load (the engine's CRC, truncation) or no
// longer has the SHA-256 of its rows is reported, moved to
// ckpt.safetensors.bad, and its model trained again. The training columns
// (ms per update, loss of the last 10 updates in nats) come from the
// engine's metrics log, as in every study.
//
// Output directories of the study's earlier layout (one results file per
// evaluation, models/<key>/train.json) are not read as done: their
// checkpoints are resumed (already trained: nothing to train) and every
// model evaluated again.
package extrapstudy
