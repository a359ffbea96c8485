// Package copestudy is the CoPE tasks study of issue #33 (point 5): does
// CoPE (Golovneva et al. 2024, arXiv 2405.18719), whose positions count
// the keys its gates select, solve the selective copy and counting tasks
// where encodings that count tokens fail, in distribution and in contexts
// with more (or fewer) blanks and passes than training? The tasks are
// package copetasks'; the command experiments/cope is a thin wrapper
// around Run.
//
// # Plan
//
// A Plan lists the tasks (TaskPlan: the options, the training context
// length and the test conditions, the first of which is the training
// one), the encodings (posenc names or variants "name@key=value",
// study.ParseVariant), the seeds, the training configuration shared by
// every model (BaseConfig: d = 64, 4 heads, 2 blocks, FFN 128, batch 32;
// each task sets the vocabulary and the sequence length) and the numbers
// and seeds of the validation and test sequences. DefaultTasks are
// selective copy (16 data tokens among 16 blanks in training; conditions
// iid, dense with 8 blanks, longer with 48) and counting (3 variables, 8
// assignments and increments among passes in contexts of 32 tokens;
// conditions iid and longer, contexts of 64 tokens); DefaultEncodings are
// cope, rope, alibi and none. Preset returns "quick" (one seed, 600
// updates, 128 test sequences per condition) and "full" (three seeds,
// 2000 updates, 256 test sequences). Every model of a plan trains for the
// same number of updates.
//
// A job is one model: a task, an encoding and a seed, keyed
// "<task>-<label>-seed<s>" ("copy-cope-seed1"), task-major. Each is
// trained with the engine (trainer.RunTask on a copetasks.Task) and scored
// under every condition of its task: one Row per (task, encoding, seed,
// condition), with the accuracy on answer tokens, the exact answers, the
// bits per answer token, the majority-answer baseline and the right
// answer tokens of every test sequence (for the paired comparisons over
// sequences). An encoding that cannot serve a condition's length (a
// learned table too short: posenc.ErrBeyondTable) gives an n/a row.
//
// # Output and resumption
//
// Under the output directory (DefaultDir: runs/cope/<preset>):
//
//	models/<key>/ckpt.safetensors  training checkpoint (+ ckpt.metrics.jsonl)
//	results/<key>.json             the rows of one model, with the spec they were computed under
//	results.csv, results.json      all rows
//	table.md                       per task: accuracy (with the majority baseline), exact answers
//	                               (copy), bits per answer token; paired comparisons; training
//	accuracy.png                   accuracy per encoding, one panel per task, a marker per condition
//
// The framework is package study's, as for the other studies: Run skips
// models whose rows are saved under the same spec, resumes an interrupted
// training from its checkpoint, and re-renders; RunJob runs one model
// (-job N, a Slurm array); Render rewrites the outputs from the saved
// rows. Each model is locked while it runs, and the rendered files while
// they are written.
package copestudy
