package study

import (
	"encoding/base64"

	"github.com/pkg/errors"
)

// PackHits encodes per-item right/wrong outcomes (hits[i]: item i of the
// test set, in its order) as the base64 of a bitset, least significant bit
// first: 10,000 test images take 1,668 characters of a results.json row.
// Paired comparisons over items (stats.PairedBootstrap) read them back
// with UnpackHits.
func PackHits(hits []bool) string {
	b := make([]byte, (len(hits)+7)/8)
	for i, h := range hits {
		if h {
			b[i/8] |= 1 << (i % 8)
		}
	}
	return base64.StdEncoding.EncodeToString(b)
}

// UnpackHits decodes n outcomes packed by PackHits. It returns an error if
// s is not base64 or does not hold n items.
func UnpackHits(s string, n int) ([]bool, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.Wrap(err, "unpack hits")
	}
	if len(b) != (n+7)/8 {
		return nil, errors.Errorf("unpack hits: %d bytes hold %d to %d items, not %d", len(b), 8*len(b)-7, 8*len(b), n)
	}
	hits := make([]bool, n)
	for i := range hits {
		hits[i] = b[i/8]&(1<<(i%8)) != 0
	}
	for i := n; i < 8*len(b); i++ {
		if b[i/8]&(1<<(i%8)) != 0 {
			return nil, errors.Errorf("unpack hits: a bit set past item %d", n)
		}
	}
	return hits, nil
}

// PackCounts encodes per-item counts of 0 to 255 (the right nodes of each
// test graph, in the order of the test set) as the base64 of one byte per
// item. It returns an error for a count outside that range.
func PackCounts(counts []int) (string, error) {
	b := make([]byte, len(counts))
	for i, c := range counts {
		if c < 0 || c > 255 {
			return "", errors.Errorf("pack counts: item %d counts %d, outside 0..255", i, c)
		}
		b[i] = byte(c)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// UnpackCounts decodes n counts packed by PackCounts. It returns an error
// if s is not base64 or does not hold n items.
func UnpackCounts(s string, n int) ([]int, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.Wrap(err, "unpack counts")
	}
	if len(b) != n {
		return nil, errors.Errorf("unpack counts: %d items, not %d", len(b), n)
	}
	out := make([]int, n)
	for i, v := range b {
		out[i] = int(v)
	}
	return out, nil
}
