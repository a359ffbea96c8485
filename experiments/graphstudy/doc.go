// Package graphstudy is the graph study of issue #14: it tests whether
// structural position encodings help a Transformer over the nodes of a
// graph, on a task whose answer depends on the structure and not on node
// order. The command experiments/graphs is a thin wrapper around Run.
//
// # Task
//
// Task is a layers.GraphTransformer node classifier that trains through the
// project's one engine, trainer.RunTask: on graphdata's distance-to-marked
// task (per node: the shortest-path distance to the one marked node,
// clipped; node order shuffled), training batches of Batch graphs padded to
// a fixed N (the largest training size), so that the training graph is
// built once; each batch's spatial relations are rebound through a
// posenc.Feed. Batch k is drawn by a generator seeded with (seed, k), with
// the Laplacian sign flips of Dwivedi & Bresson, so a resumed run sees the
// batches of an uninterrupted one. Evaluate scores a data set at its own
// largest N (the larger out-of-distribution graphs included); a graph
// larger than the model's configured maximum is an error naming both.
//
// # Plan
//
// A Plan lists the encodings ("none"; "laplacian", the study-level name of
// the Laplacian-eigenvector input, LapK eigenvectors; "graphormer-spatial";
// "graphormer-spatial+graphormer-centrality"; posenc variants
// name@key=value), the seeds, the training configuration (BaseConfig: d =
// 64, 4 heads, 3 blocks, batch 32 graphs, AdamW lr 1e-3) and the data:
// 2,000 graphs of 8-24 nodes split 80/10/10, and 500 graphs of 32-48 nodes
// from another seed. Preset returns "quick" (one seed) and "full" (three
// seeds, longer training).
//
// # Molecules
//
// A plan with Molecules (the "molecules" preset, MoleculesPreset) replaces
// the synthetic task by TPSA regression on the molecules of a TPSA file
// (experiments/molecules, Debian's rdkit-data): atoms are nodes with their
// one-hot features, bonds edges, the largest TestPercent% of the molecules
// by heavy atoms the "ood" test set (molecules.SplitBySize), the others
// split into training, validation and "test". The model predicts one
// standardised value per molecule from its mean-pooled node states
// (layers.GraphConfig.Regression), trained on the mean squared error
// (MSE); rows report RMSE, MAE and R² in Å² and each test molecule's
// absolute error. Bond features are not used.
//
// Plan.Unreachable chooses what attention does with pairs of nodes in
// different components: UnreachableBucket (the default, the spatial
// bias's learned unreachable row) or UnreachableMask (blocked, as in
// Graphormer's collator; PairMask, layers.GraphTransformer.FwdPairMask).
//
// # Output and resumption
//
// Under the output directory (DefaultDir: runs/graphs/<preset>):
//
//	models/<label>-seed<s>/ckpt.safetensors  training checkpoint (+ ckpt.metrics.jsonl)
//	results/<label>-seed<s>.json             the rows of one model, with the spec they were computed under
//	results.csv, results.json                all rows (one per model x test set)
//	table.md                                 accuracy and speed tables
//	accuracy.png                             node accuracy per encoding, trained sizes vs larger graphs
//
// Run skips models whose rows are saved under the same spec, resumes an
// interrupted training from its checkpoint, and re-renders. Each model is
// locked while it runs, and the rendered files while they are written.
package graphstudy
