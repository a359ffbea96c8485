// Package study is the one study framework of this project, and the
// length-extrapolation study built on it: the source documents' headline
// experiment (train at L, evaluate at 2L, 4L, 8L) as a reproducible,
// resumable run. The command experiments/extrapolation is a thin wrapper
// around Run.
//
// # The framework: plan, jobs, run, persist, aggregate, render, read
//
// Every study of trained models (visionstudy, graphstudy, codestudy,
// timestudy, stabilitystudy) keeps only its specifics: its plan and
// presets (the grid of encodings x seeds x conditions), its task and model
// builder, its metric and its tables. The rest is here:
//
//   - Jobs: one job per trained model with a stable key and index (the
//     Slurm array index, -job N), resume from checkpoints, a lock per job,
//     the job's rows saved with its spec and checkpoint SHA-256 and reused
//     only while both hold (NewStudyJobs builds it from RunOptions;
//     SameConfig compares specs with resolved engine configurations).
//     RenderSaved refuses, writing nothing, when saved rows were made
//     under another configuration than the plan's.
//   - TrainModel trains a job through the engine and returns what every
//     row records of its model (Trained: updates, ms per update, loss,
//     validation, size, provenance: BLAS, Go version, git revision from the
//     build or git describe); EvalEach scores it under each condition,
//     turning an encoding's posenc.ErrBeyondTable into an n/a row.
//   - Opener gives a study package its Run, RunJob and Render;
//     Command and ExecuteStudy give its command the common flags, the exit
//     statuses and the -jobs/-job/-render actions.
//   - Cells and Cell aggregate a metric over seeds with its 95% t interval
//     (package stats); Pair gives the paired difference of two encodings
//     over seeds and, from per-item scores (PackHits, UnpackHits), over
//     seeds and items (a two-level bootstrap); stats.Compare words it.
//   - WriteOutputs writes results.csv, results.json, table.md and the
//     plots atomically; experiments/summary aggregates the committed
//     results of every study and writes the docs' tables.
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
// live memory and the timed pass runs with the default GC.
//
// # Output and resumption
//
// Under the output directory (DefaultDir: runs/extrapolation/<preset>):
//
//	models/<enc>-seed<s>/ckpt.safetensors  training checkpoint
//	models/<enc>-seed<s>/train.json        its step, timing and spec
//	results/<eval enc>-seed<s>.json        the rows of one evaluation job
//	results.csv, results.json              all rows (one per encoding x seed
//	                                       x length x protocol)
//	table.md                               Markdown tables
//	bpb_all.png, bpb_last-L.png            bits per byte against Le: every
//	                                       encoding, and a zoom on those
//	                                       within 0.1 of their value at L
//
// Checkpoints and results are saved as they are produced; Run skips what is
// done, resumes an interrupted training from its checkpoint (the resumed run
// reproduces the uninterrupted one exactly), and a finished study only
// re-renders. Saved work is reused only if its configuration, corpus and
// evaluation text match the plan's; otherwise Run reports the mismatch
// before doing anything.
//
// train.json records the SHA-256 of the checkpoint of its step. A
// checkpoint to resume or evaluate that fails to load (trainer's CRC,
// truncation) or, for a finished model, no longer has that SHA-256 is
// reported, moved to ckpt.safetensors.bad, and its model trained again.
// Jobs (the vision, graph, code, time and stability studies) does the same
// with the SHA-256 recorded in results/<key>.json (a checkpoint removed
// after its rows were saved leaves them valid), and Jobs.Redo
// (the -redo ENC[,ENC] flag of Command) reruns only the jobs of those
// labels, refusing a name that labels none.
package study
