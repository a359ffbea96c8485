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
// before anything is modified. Run drives a whole run for the command
// experiments/train: progress bar, periodic evaluation and checkpoints,
// automatic resumption, a sample and a summary line.
//
// # Evaluation
//
// An Evaluator is a forward-only graph of [Batch, Le] built once from a
// parameter store and reused for every window; it has no gradient nodes, so
// evaluation never disturbs training. Eval scores non-overlapping windows of
// Le bytes (each byte after the first, up to the last whole window, is the
// target of exactly one window),
// or only the last n targets of each window, and reports the mean
// cross-entropy in bits per byte, computed in float64 from the logits. A
// uniform model scores exactly 8. Evaluate builds, scores and releases an
// Evaluator: the extrapolation study calls it at Le = L, 2L, 4L, 8L on one
// store; a model that cannot run at Le (a learned table) returns the
// layer's error.
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
