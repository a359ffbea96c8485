// Package visionstudy is the vision study of this project (issue #13): it
// tests the 2-D position encodings of package posenc where the source
// documents place them, on image patches, against the 1-D baselines on the
// flattened patch sequence. The command experiments/vision is a thin
// wrapper around Run.
//
// # Task
//
// Task is a layers.ViT classifier over MNIST patch sequences that trains
// through the project's one engine, trainer.RunTask (AdamW, warm-up and
// cosine schedule, global-norm clipping, atomic checkpoints, resumption,
// metrics.jsonl): its training graph maps patches [B, T, P·P] and labels
// [B] to the mean cross-entropy. Accuracy classifies a dataset at any patch
// grid with trained weights.
//
// # Plan
//
// A Plan lists the encodings (posenc names or variants name@key=value),
// the seeds, the training configuration (BaseConfig: d = 64, 4 heads, 3
// blocks, batch 64, AdamW lr 1e-3), the patch size (4: a 7×7 grid of
// 28×28 images) and the test conditions (Resolution): the test images as
// they are, centred on a 56×56 canvas (the digit keeps its size, the grid
// grows to 14×14) and upscaled 2× (the digit grows with the grid). Preset
// returns "quick" (one seed), "full" (three seeds) and "fashion" (the full
// preset on Fashion-MNIST).
//
// Plan.Dataset chooses the data: MNIST (the default, "") or "fashion",
// Fashion-MNIST from Debian's dataset-fashion-mnist
// (images.LoadFashionMNIST; a missing installation is an error naming the
// package and scripts/install-data.sh). WithDataset sets it and names the
// plan after it ("quick-fashion"). Each row records the dataset (Row.Dataset,
// "" for MNIST) and the four files read with their SHA-256
// (Row.DataFiles, in results.json).
//
// A learned 2-D table cannot serve a larger grid as it is: its row is n/a
// with the encoding's error as the note, and a second row evaluates it with
// the plan's resampling (Plan.Resample: bicubic without antialiasing, as
// MAE's interpolate_pos_embed, in the presets; bicubic-aa is timm's
// resample_abs_pos_embed default). Other encodings that cannot serve a
// grid (the 1-D learned table beyond its 64 rows, Swin's table beyond ±6
// offsets) are n/a the same way. A class token (the variants
// name@vit-pool=cls and name@vit-pool=cls@vit-cls-pos=without, see
// layers.ViT) is an option of the model like any other.
//
// # Output and resumption
//
// Under the output directory (DefaultDir: runs/vision/<preset>):
//
//	models/<label>-seed<s>/ckpt.safetensors  training checkpoint (+ ckpt.metrics.jsonl)
//	results/<label>-seed<s>.json             the rows of one model, with the spec they were computed under
//	results.csv, results.json                all rows (one per model x resolution x evaluation setting)
//	table.md                                 accuracy, speed and memory tables
//	accuracy.png                             accuracy per encoding and resolution
//
// Run skips models whose rows are saved under the same spec, resumes an
// interrupted training from its checkpoint, and re-renders. Each model is
// locked while it runs, and the rendered files while they are written.
package visionstudy
