// Package graphdata is the host-side data of the graph experiments:
// undirected graphs, their shortest-path distances, Graphormer spatial
// relations, degrees and Laplacian positional encodings, seeded synthetic
// graph tasks whose answers depend on structure rather than node order, and
// padded batches for a Transformer over nodes. It has no graph ops and no
// encodings: those live in posenc and read the relations a Batch gives
// (Batch.Positions, posenc.PosPairwise).
//
// # Graphs
//
// A Graph is undirected and simple, on nodes 0..N-1, with sorted adjacency
// lists (NewGraph builds one from an edge list; Check verifies one and its
// size: "graph has 70 nodes, the maximum is 64"). MaxGraphNodes (4096)
// bounds every graph, since distances take N*N ints. Degrees, Triangles and
// Components are the usual quantities; Permute renames nodes.
//
// # Distances and spatial relations
//
// ShortestPaths returns the BFS hop distances [N*N] (row-major, symmetric,
// 0 on the diagonal, Unreachable = -1 across components). SpatialRelations
// maps them to the ids of a Graphormer spatial bias (Ying et al. 2021, "Do
// Transformers Really Perform Bad for Graph Representation?"), a table of
// NumSpatialRelations(maxDist) = maxDist+2 rows:
//
//	0 .. maxDist-1   exact distances (0: a node with itself)
//	maxDist          distances >= maxDist
//	maxDist+1        unreachable pairs (UnreachableRelation), and padding in a Batch
//	maxDist+2        reserved for a virtual graph token (VirtualRelation), never produced here
//
// DistanceRelations does the same for a given matrix and rejects one of the
// wrong shape. A DistanceCache (zero value ready, safe for concurrent use)
// computes each graph's distances and Laplacian encoding once, keyed by the
// graph's Example.ID.
//
// # Laplacian positional encoding
//
// LaplacianPE(g, k) [N*k] holds the eigenvectors of the symmetric
// normalised Laplacian I - D^-1/2 A D^-1/2 (an isolated node's row of
// D^-1/2 is 0, so its row of L is e_i) for the 2nd to (k+1)-th smallest
// eigenvalues, from gonum's mat.EigenSym, as Dwivedi & Bresson 2020 ("A
// Generalization of Transformer Networks to Graphs") and Dwivedi et al.
// 2020 ("Benchmarking Graph Neural Networks"): only the smallest
// eigenvector is dropped; missing columns (N-1 < k) are zero; each column's
// first entry of magnitude > 1e-6 is positive. A repeated eigenvalue's
// basis is the one EigenSym returns. FlipSigns flips each column's sign at
// random, as those papers do at every training step.
//
// # Synthetic tasks
//
// Generate(TaskOptions) samples Count Erdős–Rényi graphs G(n, p) with n
// uniform in [MinNodes, MaxNodes] and either a fixed EdgeProb or p =
// AvgDegree/(n-1) (constant expected degree), optionally Connected (each
// extra component joined to the earlier ones by one random edge), then
// renames the nodes by a random permutation, and labels them:
//
//	distance-to-marked  per node: one marked node (feature 1, others 0);
//	                    class = distance to it, clipped to MaxDist; MaxDist+1 if unreachable
//	triangles           per graph: every node's feature is 1;
//	                    class = number of triangles, clipped to MaxTriangles
//
// Example i depends only on (Seed, i) and the options (a PCG generator per
// example), so Count only sets how many are drawn. DefaultTaskOptions gives
// options with reasonably balanced classes. Split cuts a data set into
// train/validation/test parts by fractions; the out-of-distribution test is
// another Generate with larger MinNodes/MaxNodes (and another Seed): Example
// IDs encode kind, sizes, model, seed and index, so both sets share one
// DistanceCache.
//
// # Batches
//
// NewBatch(ds, idx, BatchOptions) pads B graphs to the largest N of the
// batch:
//
//	X        [B, N, F]  float32 node features, 0 for padding
//	Valid    [B][N]     true for real nodes (graph.PaddingMask's input); Mask [B, N] the same as 1/0
//	Rel      [B, N, N]  spatial relation ids in [0, NumRel); pairs with padding are unreachable
//	Degrees  [B, N]     node degrees, 0 for padding
//	LapPE    [B, N, K]  Laplacian encoding (BatchOptions.LapK > 0), sign-flipped if Flip is set
//	Labels   [B, N]     per-node classes, -1 for padding (CrossEntropy ignores them); [B] per graph
//	Targets  [B]        the graphs' real-valued Example.Target of a regression data set (Dataset.Regression; no Labels)
//
// Batch.Positions gives posenc.NewPairwise(B, N, N, NumRel, Rel).
//
// # Errors
//
// Bad input is an error naming the problem, never a panic: an empty graph,
// a self-loop, a duplicate edge, an endpoint out of range, a graph larger
// than the configured maximum, a distance matrix of the wrong shape, bad
// task or batch options, a split fraction that leaves a part empty.
// ShortestPaths, Degrees, Triangles and Components expect a well-formed
// Graph (NewGraph's, or one Check accepts) and panic like a slice index on
// a malformed one; every other function checks the graph.
package graphdata
