// Package trainer is the training and evaluation code shared by every
// experiment and notebook: byte-level data, the AdamW training loop,
// validation bits per byte, checkpoints and sampling.
//
// # Data
//
// Tokens are bytes (Vocab = 256). LoadCorpus reads a text file (default:
// Newton's Opticks, $GOROOT/src/testdata/Isaac.Newton-Opticks.txt) and
// splits it: the first 90% of the bytes train, the last 10% validate. A
// Batcher draws B windows of T+1 bytes at uniformly random offsets from a
// seeded PCG generator whose state is saved in checkpoints.
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
// before anything is modified.
//
// Run(ctx, cfg, corpus, RunOptions) is the engine of every run (the command
// experiments/train and the extrapolation study): it resumes from a
// checkpoint, trains to cfg.Steps, evaluates every cfg.EvalEvery updates and
// at the end (unless NoEval), saves checkpoints every SaveEvery updates and
// at the end, and prints a sample and a summary. Callers follow it with
// hooks: OnStart (the step it starts from), BeforeStep (an error stops the
// run), OnStep (every update, with its wall time), OnSave (after every
// checkpoint write; an error stops the run). A cancelled context or a
// BeforeStep error saves the checkpoint (if an update happened since the
// last save) and returns an error wrapping ErrInterrupted; running again
// resumes, and the losses equal those of an uninterrupted run.
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
// # Checkpoints
//
// A checkpoint is a safetensors file holding every parameter under its name
// (in the run's dtype), the optimizer state under "optim/<key>" (float64),
// and metadata: the Config as JSON, the step, the batch generator state and
// a CRC-32C of the tensor data. It is written atomically (temporary file in
// the same directory, fsync, rename). Loading reports truncated or corrupt
// files, missing, extra or misshapen tensors, and configuration mismatches
// ("checkpoint was trained with pos=rope, d_model=128; this run asks for
// pos=none, d_model=64"). A run stopped at step k and resumed from its
// checkpoint reproduces the losses of an uninterrupted run exactly.
// LoadModel returns the weights and configuration of a checkpoint for
// evaluation or sampling.
//
// # Sampling
//
// Sample continues a prompt byte by byte with temperature sampling from a
// seeded generator, over a sliding context of at most Window bytes (the
// training length for models without relative positions).
package trainer
