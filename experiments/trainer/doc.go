// Package trainer is the training and evaluation code shared by every
// experiment and notebook: one training engine for any model (a Task),
// the byte-level language model as its first task (data, validation bits
// per byte, sampling), and checkpoints.
//
// # Engine and tasks
//
// The engine (RunTask, and NewTaskTrainer for the step-level API) owns what
// every model trains with: the parameter store (graph.Params, seeded with
// Config.Seed, in Config.Dtype), AdamW, the warm-up cosine schedule,
// global-norm clipping, the non-finite checks, atomic checkpoints with
// resume, the lock, the progress bar, metrics.jsonl and the ErrInterrupted
// semantics. A Task is a model plus its data:
//
//	Kind() string                  "lm" for the language model; recorded in checkpoints
//	Build(g, p) (loss, learn, err) the training graph of one batch: loss a scalar
//	                               (0-d or [1]) of p's dtype, mean nats; learn = every
//	                               parameter of p, once each
//	Next() error                   draw the next batch and G.Let it into the inputs
//	Items() int                    items (tokens, images) per batch, for throughput
//	State() / SetState(b)          the batch generator's state (checkpointed)
//	Validate(p) (Validation, err)  score weights p: Name ("bits/byte", "accuracy"),
//	                               Value, Text (the log line)
//	DataHash() string              identifies the training data (checked on resume)
//	Describe() string              one line for the log, after Build
//
// NewTaskTrainer checks Config.ValidateTraining (optimizer, schedule, steps,
// batch, eval batch, dtype, model dimensions; Model.Vocab may be 0 and
// SeqLen is unused), calls Build once, and refuses with an error a nil or
// non-scalar loss, a loss of another dtype or graph, and learnable nodes
// that are not exactly the store's parameters; the engine then adds the
// gradients and one tape machine. Before each update Trainer.TrainStep calls
// Next. Validate must not disturb training (build a separate forward
// graph on p, as Evaluator does); a non-finite Value is an error. Optional
// interfaces: TaskConfigurer (TaskConfig recorded in checkpoints,
// CheckTaskConfig refusing a checkpoint of another image size, patch size
// or data set), UnitNamer (the loss and item names of logs; defaults
// "bits" and "items"), io.Closer (called by Trainer.Close), and DataPath()
// string (the data file, recorded). Config.Model is the task's model
// configuration, recorded in checkpoints and compared on resume
// (ResumeRules).
//
// LMTask (NewLMTask) is the byte-level language model; Run(ctx, cfg, c,
// opt) is RunTask(ctx, cfg, NewLMTask(cfg, c), opt) and New(cfg, c) is
// NewTaskTrainer(cfg, NewLMTask(cfg, c)), with the numbers, logs, metrics
// and checkpoints of the engine before tasks existed. Config.Validate adds
// the language model's rules (Model.Vocab = 256, SeqLen > 0) to
// ValidateTraining. Evaluator, Score, Evaluate, Sample and LoadModel are the
// language model's; LoadTaskModel(path, task) returns the weights of any
// task's checkpoint (kind and task configuration checked) for evaluation.
//
// # Data
//
// Tokens are bytes (Vocab = 256). LoadCorpus reads a text file (default:
// Newton's Opticks, $GOROOT/src/testdata/Isaac.Newton-Opticks.txt; at most
// MaxCorpusBytes = 1 GiB, devices and directories refused) and splits it: the first 90% of the bytes train, the last 10% validate. A
// Batcher draws B windows of T+1 bytes at uniformly random offsets from a
// seeded PCG generator whose state is saved in checkpoints. Corpus.Hash is
// the SHA-256 of the corpus bytes; checkpoints record it.
//
// # Training
//
// Config holds the model configuration (layers.Config) and every training
// setting; DefaultConfig is the reference run (L = 64, batch 32, AdamW
// 2e-3 with betas (0.9, 0.99) and weight decay 0.01 on matrices and
// embeddings, 100 warm-up updates then cosine to 0.1*lr at 2000 updates,
// global-norm clipping at 1, float32, seed 1). New builds the training graph
// once (ids [B, T] -> logits [B*T, 256] -> mean cross-entropy, its
// gradients, one tape machine with the parameters bound as dual values);
// each Trainer.TrainStep lets a new batch, runs the machine, clips the
// global gradient norm, sets the scheduled learning rate and applies AdamW
// (Loshchilov & Hutter 2019), which zeroes the gradients. A NaN or infinite
// loss or gradient norm stops training with an error naming the update,
// before anything is modified; an update that makes a weight non-finite
// (a learning rate far too high) stops it too, naming the weight, and the
// trainer then refuses to save. New refuses a configuration whose estimated
// memory (EstimateMemory: weights, gradients, AdamW state, activations;
// formula in its doc) exceeds MemAvailable.
//
// # Options
//
// Every leaf field of Config (with layers.Config and posenc.Options
// flattened) is an option with a kebab-case name (internal/fields): -lr,
// -seq-len, -d-model, -t5-max-distance, ... BindFlags registers them all on
// a flag.FlagSet, with -dtype, the aliases -seq and -d, -config (a JSON
// configuration, unknown fields refused; explicit flags override it) and
// -dump-config; a new option field gets a flag with no new code.
// DecodeConfig reads the JSON form. Config.Resolved replaces "zero means
// default" fields by their values; checkpoints and summaries record the
// resolved configuration and the Provenance (BLAS, Go version, git revision
// and whether the tree was dirty).
//
// RunTask(ctx, cfg, task, RunOptions), and Run(ctx, cfg, corpus,
// RunOptions) for the language model, is the engine of every run (the
// command experiments/train, the extrapolation study, the vision
// experiment): it resumes from a
// checkpoint, trains to cfg.Steps, evaluates every cfg.EvalEvery updates and
// at the end (unless NoEval), saves checkpoints every SaveEvery updates and
// at the end, and prints a sample (language model only) and a summary. Callers follow it with
// hooks: OnStart (the step it starts from), BeforeStep (an error stops the
// run), OnStep (every update, with its wall time), OnSave (after every
// checkpoint write; an error stops the run). A cancelled context or a
// BeforeStep error saves the checkpoint (if an update happened since the
// last save) and returns an error wrapping ErrInterrupted; running again
// resumes, and the losses equal those of an uninterrupted run.
//
// RunOptions.InitFrom starts a new run from the weights of another run's
// checkpoint or exported weights file (fine-tuning, e.g. at a longer
// sequence length): InitConfig derives its configuration (the source's,
// with the options given, the length-dependent ones re-resolved),
// InitRules says what it must keep, and its checkpoints record the source
// (InitInfo, Checkpoint.Init).
//
// Run fails before its first update on what would fail later: bad options,
// a configuration that cannot fit in memory, a checkpoint path that is not
// writable or is locked by another run (Lock takes flock LOCK_EX|LOCK_NB on
// LockPath(ckpt), holding pid, host, command and start time; the lock file
// is removed on a clean exit and a file left by a killed run is harmless).
// Holding the lock, it removes the temporary files a killed save left. It
// prints the final validation before the final save (a failing save then
// says the result was computed but not saved), treats a non-finite
// validation as an error, prints losses in bits per byte, shows progress as
// a bar on a terminal and as a plain line every PlainInterval otherwise
// (NewProgress), and writes one JSON line per update to the checkpoint's
// own log MetricsPath(ckpt) (X.safetensors -> X.metrics.jsonl; runs before
// this wrote <checkpoint dir>/metrics.jsonl, which FindMetricsPath and
// ReadCheckpointMetrics still read and a first resume copies) (Metric: step, loss in bits (bits/byte for
// the language model), learning rate, gradient norm before clipping,
// timings, the validation where measured: val_bpb for bits/byte, else val
// and val_name), dropping lines after the step it resumes from, so an
// interrupted and resumed run leaves the log of an uninterrupted one.
//
// # Attention monitor
//
// RunOptions.MonitorEvery = N (the -monitor N flag of experiments/train)
// records, at the first update, every N-th and the update at which a run
// fails, one MonitorRecord per layer and head: the attention entropy (mean
// and min over queries), the largest and smallest pre-softmax score, the
// RMS of the position bias or terms, the fraction of nearly one-hot
// queries (graph.HeadStats, measured inside the fused attention op by each
// layer's graph.AttentionProbe), with the update's gradient norm before
// clipping and its loss. They go to MonitorPath(ckpt) (X.monitor.csv;
// formerly <checkpoint dir>/monitor.csv, still read by FindMonitorPath)
// (ReadMonitor; resumption drops the records of later steps, with or
// without the monitor) and to
// RunOptions.OnMonitor; MonitorPNG and WriteMonitorPNG draw them, one row
// per figure, one column per layer, one line per head. The task must
// implement Prober (LMTask does). Off (0), no probe is armed: training is
// bit for bit what it is without the monitor, and on as well, since the
// probe only reads. A failing update returns a *NonFiniteError (errors.As)
// naming its step.
//
// # Evaluation
//
// An Evaluator is a forward-only graph of [Batch, Le] built once from a
// parameter store and reused for every window; it has no gradient nodes, so
// evaluation never disturbs training. Evaluator.Score scores a text with
// several protocols in one pass (lastN = 0: every target; lastN = k: the
// last k targets of each window), returning for each a Score (summed nats,
// tokens, windows; BitsPerByte, Perplexity). The text is cut into
// non-overlapping windows of Le bytes; if n-1 is not a multiple of Le, one
// more window right-aligned to the end of the text scores only the r =
// (n-1) mod Le targets no earlier window scored, so protocol 0 scores each
// of the n-1 targets exactly once at every Le. The cross-entropy is
// computed in float64 from the logits and summed in window order, then
// position order. A uniform model scores exactly 8 bits per byte. ScoreText
// builds, scores and releases an Evaluator; Evaluate and Evaluator.Eval
// score the full windows only with one protocol and report means. A model
// that cannot run at Le (a learned table) returns the layer's error, which
// wraps posenc.ErrBeyondTable.
//
// Long documents. EvalOptions.Protocol (a Protocol; ParseProtocol reads
// "chunks:W", "stride:W:S", "memory:W:M", "sinks:W:S") scores each window
// of Le bytes as a document with a model that never sees more than its
// protocol's graph: independent chunks, strided windows (every target
// with >= W-S context), segments with a memory of the states before
// (layers.SegmentRunner) or a sliding key/value cache with attention
// sinks (layers.Decoder). Every protocol scores the same targets as the
// full one, so their bits per byte compare directly; Scorer is the graph
// that does it (docs/evaluation.md).
//
// Evaluation memory. EstimateEvalMemory estimates the bytes of an
// Evaluator's graph (forward values only: the [B*T, ·] values of the blocks
// and the logits, and, materialised, the [B, H, T, T] probabilities and
// terms, the [H, T, T] biases and the [T, T] causal mask, with per-encoding
// costs fitted to measured allocations; with layers.Config.Stream no T²
// term, O(T) in all). CheckEvalMemory compares it with the available
// memory (MemAvailable) and returns a *MemoryError stating the estimate,
// the memory and what helps (-stream if the encoding can, StreamError, else
// a smaller -len or -batch). NewEvaluator refuses such a graph before
// building it; ScoreText and Evaluate refuse a text shorter than one window
// first (ErrTooShort). EstimateSampleMemory is the estimate of Sample's
// largest graph; PeakRSS reads the process's peak resident set size.
//
// # Checkpoints
//
// A checkpoint is a safetensors file holding every parameter under its name
// (in the run's dtype), the optimizer state under "optim/<key>" (float64),
// and metadata: the resolved Config as JSON, the step, the batch generator
// state, the corpus SHA-256 (Task.DataHash) and path, the provenance, and a
// CRC-32C covering the tensors and all of that metadata. The language model
// writes format v2, as before tasks existed; other tasks write v3, which
// adds the task kind ("task") and the hex task configuration
// ("task_config"), both under the CRC. v1 files (CRC over the tensors only)
// and v2 files are still read, as checkpoints of task "lm". It is written atomically
// (temporary file in the same directory, fsync, rename, mode 0644) and only
// from finite weights. Loading reports truncated, corrupt or edited files,
// missing, extra or misshapen tensors.
//
// Resuming (Trainer.Restore, ResumeRules) refuses a checkpoint of another
// task kind, of another task configuration (TaskConfigurer's error), of
// another corpus or data (naming both hashes) or with another value of any
// model option,
// batch, seq-len, seed or dtype ("checkpoint was trained with pos=rope,
// d-model=128; this run asks for pos=none, d-model=64"); it allows, and
// lists in the log, changes of steps, lr, warmup, floor-frac, beta1, beta2,
// adam-eps, weight-decay, clip-norm, eval-every and eval-batch. A checkpoint
// already at cfg.Steps is not trained further ("already trained to step
// N; nothing to do"). A run stopped at step k and resumed from its
// checkpoint reproduces the losses of an uninterrupted run exactly.
// LoadModel returns the weights and configuration of a checkpoint for
// evaluation or sampling; ExportWeights (a model) and ExportCheckpoint (a
// checkpoint of any kind) write the weights alone as a plain safetensors
// file, atomically, recording the configuration and the kind; LoadWeights
// reads such a file back, and FileFormat tells from the header alone
// whether a file is a training checkpoint, exported weights or neither.
// Checkpoint.Kind is the task kind a checkpoint records; KindOf describes
// each kind of the project (Kinds) and the command that evaluates it. The
// command experiments/checkpoint evaluates, samples, exports and describes
// checkpoints.
//
// # Sampling
//
// Sample continues a prompt byte by byte with temperature sampling from a
// seeded generator, over a sliding context of at most Window bytes (the
// training length for models without relative positions). The
// temperature must be finite; NaN and ±Inf are errors.
package trainer
