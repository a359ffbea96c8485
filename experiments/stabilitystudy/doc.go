// Package stabilitystudy is the training-stability study of issue #16:
// does the survey's advice for learnable relative position biases (a small
// init of the bias table, std 0.02; a learnable scale alpha on the bias,
// init 0.1; gradient clipping; watching the attention early in training)
// change how stable training is and where it ends? The command
// experiments/stability is a thin wrapper around Run.
//
// # Grid
//
// The encodings are taken from the registry (GridEncodings): every
// trainable encoding that serves the causal 1-D LM's line positions, has
// learnable parameters (posenc Info.Learnable) and is relative
// (posenc.KindRelative): t5, shaw, shaw-scalar, xl, deberta, kerple-log,
// kerple-power, fire, dpb and cope. The learned absolute table is left
// out (the advice is about relative biases). The baselines none and rope
// (Baselines) have no position parameters. Every encoding is trained at
// every combination of
//
//	init std of the position parameters  0.02 (the remedy), 1.0   option pos-init-std
//	alpha                                off, on (the remedy)     option alpha
//	gradient clipping                    off (0), global norm 1   option clip-norm
//	peak learning rate                   ReferenceLR 2e-3, HighLR option lr
//
// and each seed (Plan.Jobs). An axis that does not change an encoding is
// collapsed to one value, written "n/a" (Plan.Axes). This is decided
// without looking at names: the LM's parameters (graph.Params with the
// first seed, after building the forward graph, so that parameters made
// lazily by the encoding exist) are built with each value of the axis and
// compared: init std is n/a when every parameter has the same initial
// values with 0.02 and 1.0 (the encoding draws its parameters with its
// own init, or has none); alpha is n/a when alpha on adds no parameter
// (the encoding has no scaled bias). The baselines therefore have the lr
// and clip axes only.
//
// HighLR (0.3) was chosen by probing: see Preset.
//
// # Model
//
// BaseConfig: trainer.DefaultConfig (the byte-level LM on Newton's
// Opticks, AdamW 0.9/0.99, weight decay 0.01, cosine to 0.1·lr, float32)
// with d = 64, 4 heads, 2 blocks, FFN 256, L = 64, batch 16, 30 warm-up
// updates, 300 updates (150 in the quick preset), the attention monitor
// every 10 updates (trainer.RunOptions.MonitorEvery), a checkpoint every
// 50 updates, and the validation bits per byte at L at the end.
//
// # Definitions
//
// Computed from each run's curves (Summarize), losses in bits per byte,
// "after warm-up" meaning updates s > Warmup (30):
//
//   - a loss spike is an update s after warm-up (and s > Window = 20)
//     whose training loss exceeds the mean of the 20 previous updates by
//     more than SpikeBits = 0.5 bits/byte; consecutive spike updates count
//     as one spike (Spikes);
//   - a gradient-norm spike is an update whose global gradient norm before
//     clipping exceeds GradSpikeFactor = 10 times the median of the 20
//     previous updates, counted the same way (GradSpikes);
//   - a run diverged if an update's loss, gradient norm or weights were not
//     finite (trainer.NonFiniteError: training stops there and the
//     checkpoint on disk stays the last good one), or if its training loss
//     exceeded DivergedBits = 8 bits/byte, the uniform model, at an update
//     after warm-up (training goes on); DivergedStep is the first such
//     update. A run stopped by a non-finite update has no validation
//     (NaN, an empty cell); one diverged by the loss rule trained to the
//     end and keeps the validation of where it ended;
//   - the final training loss is the mean of the last FinalWindow = 20
//     updates;
//   - the monitor figures are the extremes over every recorded update,
//     layer and head (finite values): the smallest attention entropy (min
//     over queries, nats), the largest |pre-softmax score|, the largest RMS
//     of the position bias or terms (n/a for rope and none), the largest
//     fraction of nearly one-hot queries.
//
// # Effects
//
// Effects compares, per encoding, remedy and learning rate, the runs that
// differ only in the remedy's axis (same other axes and seed): the mean and
// sample standard deviation over those pairs of the change in validation
// bits/byte (with the remedy minus without, over the pairs in which both
// runs have a validation: a blow-up the run recovered from counts with
// what it cost), in loss and gradient-norm spikes, and the number of
// diverged runs with and without.
//
// # Output and resumption
//
// Under the output directory (DefaultDir: runs/stability/<preset>):
//
//	models/<key>/ckpt.safetensors     checkpoint (+ ckpt.metrics.jsonl, ckpt.monitor.csv)
//	results/<key>.json                the run's row, with its loss and grad-norm curves
//	results.csv, results.json         every row (without curves); the effects
//	table.md                          which remedies matter, the effects, the full grid
//	loss_high_lr.png                  loss curves at the high lr: a panel per encoding,
//	                                  a line per remedy setting (first seed)
//	effects.png                       the change in val bits/byte per remedy and encoding
//	monitor.png, monitor-<key>.csv    the monitor figure (trainer.MonitorPNG) of the
//	                                  most unstable run (MostUnstable) and its records
//
// The key of a run is "<encoding>-init<std>-alpha<on|off>-clip<norm|off>-lr<lr>-seed<s>"
// ("na" for an n/a axis). Run skips runs whose rows are saved under the
// same configuration, corpus and monitor interval (a diverged run's row is
// saved too, so it is not retrained), resumes an interrupted training
// from its checkpoint, and re-renders. Each run is locked while it runs,
// and the rendered files while they are written, so several processes may
// run the jobs of one directory (-job N) and one renders (-render).
package stabilitystudy
