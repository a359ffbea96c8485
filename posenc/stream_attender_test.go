package posenc_test

import (
	"testing"

	"github.com/rpe-go/rpe/posenc"
)

// TestCoPEStreamDivide: cope with CopeDivide (terms o, not √dh·o) streams
// as it attends materialised, to 1e-12 (TestEveryEncoding covers the
// default and Alpha).
func TestCoPEStreamDivide(t *testing.T) {
	o := harnessOptions()
	o.CopeDivide, o.CopeNPos = true, 3
	var _ posenc.StreamAttender = &posenc.CoPE{}
	checkStream(t, posenc.CoPEName, o)
}
