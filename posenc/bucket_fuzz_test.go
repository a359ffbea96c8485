package posenc_test

import (
	"math"
	"testing"

	"github.com/rpe-go/rpe/posenc"
)

// uabs is |x| without overflow.
func uabs(x int) uint64 {
	if x < 0 {
		return -uint64(x)
	}
	return uint64(x)
}

// FuzzT5Bucket checks T5Bucket's documented range, mirror symmetry and
// monotonicity for any rel (math.MinInt and math.MaxInt included) and any
// valid bucket count and max distance (the fuzzer's values are mapped onto
// valid ones).
func FuzzT5Bucket(f *testing.F) {
	for _, rel := range []int{math.MinInt, math.MinInt + 1, math.MaxInt, -1 << 40, 1 << 40, -129, -128, -127, -8, -7, -1, 0, 1, 7, 8, 127, 128} {
		f.Add(rel, true, 32, 128)
		f.Add(rel, false, 32, 128)
		f.Add(rel, true, 8, 16)
		f.Add(rel, false, 5, 3)
	}
	f.Fuzz(func(t *testing.T, rel int, bidir bool, numBuckets, maxDistance int) {
		if numBuckets < 4 || numBuckets > 1024 {
			numBuckets = 4 + int(uabs(numBuckets)%1021)
		}
		nb := numBuckets
		if bidir {
			nb /= 2
		}
		me := nb / 2
		if maxDistance <= me {
			maxDistance = me + 1 + int(uabs(maxDistance)%1000003)
		}
		bucket := func(r int) int { return posenc.T5Bucket(r, bidir, numBuckets, maxDistance) }
		b := bucket(rel)
		if b < 0 || b >= numBuckets {
			t.Fatalf("T5Bucket(%d, %v, %d, %d) = %d, outside [0, %d)", rel, bidir, numBuckets, maxDistance, b, numBuckets)
		}
		var n uint64 // the distance T5Bucket buckets
		switch {
		case bidir && rel > 0:
			if b < nb || b >= 2*nb {
				t.Fatalf("T5Bucket(%d > 0, bidirectional, %d, %d) = %d, outside [%d, %d)", rel, numBuckets, maxDistance, b, nb, 2*nb)
			}
			if m := bucket(-rel); b != m+nb {
				t.Fatalf("T5Bucket(%d) = %d, T5Bucket(%d) = %d: not mirrored with offset %d", rel, b, -rel, m, nb)
			}
			n = uint64(rel)
		case bidir:
			if b >= nb {
				t.Fatalf("T5Bucket(%d <= 0, bidirectional, %d, %d) = %d, outside [0, %d)", rel, numBuckets, maxDistance, b, nb)
			}
			n = uabs(rel)
		case rel >= 0:
			if b != 0 {
				t.Fatalf("T5Bucket(%d >= 0, causal, %d, %d) = %d, want 0", rel, numBuckets, maxDistance, b)
			}
		default:
			n = uabs(rel)
		}
		offset := 0
		if bidir && rel > 0 {
			offset = nb
		}
		switch {
		case n < uint64(me) && b != offset+int(n):
			t.Fatalf("T5Bucket(%d, %v, %d, %d) = %d, want the exact bucket %d", rel, bidir, numBuckets, maxDistance, b, offset+int(n))
		case n >= uint64(maxDistance) && b != offset+nb-1:
			t.Fatalf("T5Bucket(%d, %v, %d, %d) = %d, want the last bucket %d", rel, bidir, numBuckets, maxDistance, b, offset+nb-1)
		}
		// monotone in the distance: one step further is never in an
		// earlier bucket
		if rel < 0 && rel > math.MinInt {
			if b2 := bucket(rel - 1); b2 < b {
				t.Fatalf("T5Bucket(%d) = %d < T5Bucket(%d) = %d", rel-1, b2, rel, b)
			}
		}
		if bidir && rel > 0 && rel < math.MaxInt {
			if b2 := bucket(rel + 1); b2 < b {
				t.Fatalf("T5Bucket(%d) = %d < T5Bucket(%d) = %d", rel+1, b2, rel, b)
			}
		}
	})
}

// FuzzDebertaBucket checks DebertaBucket's documented properties for any
// rel and any valid bucket size and max position: odd (math.MinInt mirrors
// math.MaxInt), the sign of rel, exact up to mid, ±(2·mid-1) at
// maxPosition-1, |bucket| non-decreasing in |rel| and bounded by
// DebertaBucket(math.MaxInt) <= DebertaBucketLimit.
func FuzzDebertaBucket(f *testing.F) {
	for _, rel := range []int{math.MinInt, math.MinInt + 1, math.MaxInt, -1 << 40, 1 << 40, -128, -127, -17, -16, -1, 0, 1, 16, 17, 127, 128} {
		f.Add(rel, 32, 128)
		f.Add(rel, 4, 16)
		f.Add(rel, 2, 3)
		f.Add(rel, 32, 18) // maxPosition-1 barely above mid: steep log buckets
	}
	f.Fuzz(func(t *testing.T, rel, bucketSize, maxPosition int) {
		if bucketSize < 2 || bucketSize > 1024 {
			bucketSize = 2 + int(uabs(bucketSize)%1023)
		}
		mid := bucketSize / 2
		if maxPosition <= mid+1 {
			maxPosition = mid + 2 + int(uabs(maxPosition)%1000003)
		}
		bucket := func(r int) int { return posenc.DebertaBucket(r, bucketSize, maxPosition) }
		b := bucket(rel)
		bound := bucket(math.MaxInt)
		if bound > posenc.DebertaBucketLimit {
			t.Fatalf("DebertaBucket(MaxInt, %d, %d) = %d > DebertaBucketLimit", bucketSize, maxPosition, bound)
		}
		if b < -bound || b > bound {
			t.Fatalf("DebertaBucket(%d, %d, %d) = %d, outside [-%d, %d]", rel, bucketSize, maxPosition, b, bound, bound)
		}
		if (b < 0) != (rel < 0) || (b == 0) != (rel == 0) {
			t.Fatalf("DebertaBucket(%d, %d, %d) = %d, not of the sign of rel", rel, bucketSize, maxPosition, b)
		}
		if rel == math.MinInt {
			if b != -bound {
				t.Fatalf("DebertaBucket(MinInt) = %d, want -DebertaBucket(MaxInt) = %d", b, -bound)
			}
		} else if m := bucket(-rel); m != -b {
			t.Fatalf("DebertaBucket(%d) = %d, DebertaBucket(%d) = %d: not odd", rel, b, -rel, m)
		}
		a := uabs(rel)
		if a <= uint64(mid) && b != rel {
			t.Fatalf("DebertaBucket(%d, %d, %d) = %d, want %d (|rel| <= mid = %d)", rel, bucketSize, maxPosition, b, rel, mid)
		}
		if a == uint64(maxPosition-1) && uabs(b) != uint64(2*mid-1) {
			t.Fatalf("DebertaBucket(%d, %d, %d) = %d, want ±%d at maxPosition-1", rel, bucketSize, maxPosition, b, 2*mid-1)
		}
		if rel > 0 && rel < math.MaxInt {
			if b2 := bucket(rel + 1); b2 < b {
				t.Fatalf("DebertaBucket(%d) = %d < DebertaBucket(%d) = %d", rel+1, b2, rel, b)
			}
		}
		if rel < 0 && rel > math.MinInt {
			if b2 := bucket(rel - 1); b2 > b {
				t.Fatalf("DebertaBucket(%d) = %d > DebertaBucket(%d) = %d", rel-1, b2, rel, b)
			}
		}
	})
}
