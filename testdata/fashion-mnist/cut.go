//go:build ignore

// Cut writes the sample of this directory from the Fashion-MNIST files of
// Debian's dataset-fashion-mnist package: the first 40 training and the
// first 20 test images and labels, uncompressed IDX with the same headers
// but the smaller counts. Run from the repository root:
//
//	go run testdata/fashion-mnist/cut.go
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/rpe-go/rpe/experiments/images"
)

const (
	nTrain = 40
	nTest  = 20
	out    = "testdata/fashion-mnist"
)

func main() {
	for _, f := range []struct {
		name string
		n    int
	}{{images.TrainImagesFile, nTrain}, {images.TrainLabelsFile, nTrain}, {images.TestImagesFile, nTest}, {images.TestLabelsFile, nTest}} {
		x, err := images.LoadIDX(filepath.Join(images.FashionMNISTDir, f.name+".gz"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		per := len(x.Data) / x.Dims[0]
		x.Dims[0], x.Data = f.n, x.Data[:f.n*per]
		w, err := os.Create(filepath.Join(out, f.name))
		if err == nil {
			err = images.WriteIDX(w, x)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
