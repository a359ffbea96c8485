// Package study is the one study framework of this project. Every study
// of trained models (extrapstudy, visionstudy, graphstudy, codestudy,
// timestudy, stabilitystudy) is built on it.
//
// # The framework: plan, jobs, run, persist, aggregate, render, read
//
// Every study keeps only its specifics: its plan and
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
//     ContrastSection renders the comparisons a study's reading makes (an
//     encoding against another, or against itself under another
//     condition) the same way, so every claim of a reading has its row.
//   - Variant and ParseVariant: a plan entry "name@key=value@..." that
//     overrides options of the training configuration; CheckServes refuses
//     an encoding that does not serve the study's positions, listing those
//     the registry says do.
//   - WriteOutputs writes results.csv, results.json, table.md and the
//     plots atomically; experiments/summary aggregates the committed
//     results of every study and writes the docs' tables.
package study
