package images

import (
	"os"

	"github.com/pkg/errors"
)

// Fashion-MNIST (Xiao, Rasul and Vollgraf 2017: Zalando's article images,
// 60,000 training and 10,000 test images of 28×28 grey pixels, 10 classes,
// in MNIST's four IDX files) as Debian's dataset-fashion-mnist package
// installs it: FashionMNISTDir holds train-images-idx3-ubyte.gz,
// train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and
// t10k-labels-idx1-ubyte.gz. scripts/install-data.sh installs the package;
// nothing is downloaded at run time.
const (
	FashionMNISTDir     = "/usr/share/datasets/fashion-mnist"
	FashionMNISTPackage = "dataset-fashion-mnist"
)

// fashionHint is what the error for missing Fashion-MNIST files says.
const fashionHint = "Fashion-MNIST is installed by Debian's " + FashionMNISTPackage + " package (into " + FashionMNISTDir +
	"): run scripts/install-data.sh " + FashionMNISTPackage + " (as root, or with sudo), or apt-get install " + FashionMNISTPackage

// LoadFashionMNIST reads Fashion-MNIST's training and test sets from the
// four standard IDX files in dir ("" means FashionMNISTDir), as
// LoadMNISTFiles does, with the FileSum of each file read. A missing
// directory or file is an error naming the path, the dataset-fashion-mnist
// package and scripts/install-data.sh; a corrupt file is LoadMNIST's error.
func LoadFashionMNIST(dir string) (train, test *Dataset, files []FileSum, err error) {
	if dir == "" {
		dir = FashionMNISTDir
	}
	if st, err := os.Stat(dir); err != nil {
		return nil, nil, nil, errors.Errorf("fashion-mnist: directory %s does not exist (%v); %s", dir, err, fashionHint)
	} else if !st.IsDir() {
		return nil, nil, nil, errors.Errorf("fashion-mnist: %s is not a directory", dir)
	}
	for _, name := range []string{TrainImagesFile, TrainLabelsFile, TestImagesFile, TestLabelsFile} {
		if _, err := findIDX(dir, name); err != nil {
			return nil, nil, nil, errors.Errorf("fashion-mnist: %v; %s", err, fashionHint)
		}
	}
	train, test, files, err = LoadMNISTFiles(dir)
	if err != nil {
		return nil, nil, nil, errors.WithMessage(err, "fashion-mnist")
	}
	return train, test, files, nil
}
