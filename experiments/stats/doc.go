// Package stats holds the statistics every study reports: the mean of a
// metric over seeds with its 95% interval, the paired difference of two
// encodings on the same seeds (and, where a study keeps per-item scores,
// on the same evaluation items) with its interval, and the wording a
// reading may use for a comparison.
//
// # Intervals
//
// Describe gives the mean, the sample standard deviation and the 95%
// Student-t interval of the mean, mean ± t(0.975, n-1)·sd/√n. With three
// seeds t = 4.30: an interval over three seeds is wide, and that is the
// point — a difference smaller than the seed-to-seed noise is not
// resolved. One value has no interval (Lo and Hi are NaN).
//
// Paired gives the same summary for the differences a_i − b_i of two
// encodings trained with the same seeds (seed i of a against seed i of b):
// the seed-to-seed variation common to both cancels.
//
// PairedBootstrap resamples a two-level design, seeds and then the items
// (evaluation windows, images, graphs) scored within each seed, and gives
// the percentile interval of the mean difference: both sources of noise
// count.
//
// # Wording
//
// Compare turns a paired difference into the sentence a reading uses: "A
// beats B by x [lo, hi] unit" only when the interval excludes zero,
// otherwise "no difference resolved between A and B at this size". A claim
// whose interval contains zero cannot be worded as a win.
package stats
