package graph

import (
	"math"
	"sync"
)

// OneHotThreshold is the largest attention probability from which a
// query's attention counts as nearly one-hot in HeadStats.OneHot.
const OneHotThreshold = 0.9

// HeadStats are one head's attention statistics over the runs recorded by
// an AttentionProbe (every batch element and query of every recorded run).
//
// A query row counts for the entropy and one-hot figures only if it may
// attend to at least two keys: the first query of a causal model sees one
// key, and its attention is one-hot by construction.
type HeadStats struct {
	// EntropyMean and EntropyMin are the mean and the smallest entropy (in
	// nats) of the counted rows' attention distributions: ln n for uniform
	// attention over n keys, 0 for one-hot attention.
	EntropyMean, EntropyMin float64
	// ScoreMax and ScoreMin are the largest and smallest pre-softmax score
	// (q·kᵀ + terms) * scale + bias over the keys each query may attend to
	// (NaN if one is NaN).
	ScoreMax, ScoreMin float64
	// PosRMS is the root mean square of the position part of those scores,
	// terms * scale + bias (the encoding's contribution: a T5 or ALiBi bias,
	// the content-position terms of Shaw, Transformer-XL, DeBERTa and CoPE),
	// over the same entries; NaN when the attention has neither terms nor
	// a bias (RoPE, absolute encodings, none).
	PosRMS float64
	// OneHot is the fraction of counted rows whose largest probability is
	// at least OneHotThreshold.
	OneHot float64
	// Rows is the number of counted rows (NaN figures when 0).
	Rows int
}

// AttentionProbe records HeadStats inside the fused attention op
// (AttentionOpts.Probe) while it is armed. Unarmed, the op checks one flag
// per batch element and head and computes exactly what it computes without
// a probe; armed, it adds one pass over each row of scores and one over its
// probabilities, and its outputs do not change.
//
// Arm before running the graph, read Stats after; runs accumulate until the
// next Arm (a layer applied twice in one graph contributes both calls).
// Arm, Disarm and Stats must not be called while the graph runs.
type AttentionProbe struct {
	mu    sync.Mutex
	armed bool
	heads []headAcc
}

// NewAttentionProbe returns an unarmed probe.
func NewAttentionProbe() *AttentionProbe { return &AttentionProbe{} }

// Arm clears the recorded statistics and records the following runs.
func (p *AttentionProbe) Arm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.heads = true, nil
}

// Disarm stops recording; the statistics recorded so far are kept.
func (p *AttentionProbe) Disarm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = false
}

// Armed reports whether the probe records.
func (p *AttentionProbe) Armed() bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.armed
}

// Stats returns the statistics of each head recorded since the last Arm,
// or nil if no run was recorded.
func (p *AttentionProbe) Stats() []HeadStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.heads == nil {
		return nil
	}
	out := make([]HeadStats, len(p.heads))
	for h, a := range p.heads {
		out[h] = a.stats()
	}
	return out
}

// merge adds per-(batch, head) accumulators acc [B*H] to the probe's heads.
func (p *AttentionProbe) merge(acc []headAcc, heads int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.heads) != heads {
		p.heads = make([]headAcc, heads)
		for h := range p.heads {
			p.heads[h] = newHeadAcc()
		}
	}
	for bh := range acc {
		p.heads[bh%heads].add(acc[bh])
	}
}

// headAcc accumulates one head's statistics.
type headAcc struct {
	entSum, entMin     float64
	scoreMax, scoreMin float64
	nanScore           bool
	posSq              float64
	posN               int
	hasPos             bool
	oneHot, rows       int
}

func newHeadAcc() headAcc {
	return headAcc{entMin: math.Inf(1), scoreMax: math.Inf(-1), scoreMin: math.Inf(1)}
}

func (a *headAcc) add(b headAcc) {
	a.entSum += b.entSum
	a.entMin = math.Min(a.entMin, b.entMin)
	a.scoreMax = math.Max(a.scoreMax, b.scoreMax)
	a.scoreMin = math.Min(a.scoreMin, b.scoreMin)
	a.nanScore = a.nanScore || b.nanScore
	a.posSq += b.posSq
	a.posN += b.posN
	a.hasPos = a.hasPos || b.hasPos
	a.oneHot += b.oneHot
	a.rows += b.rows
}

func (a headAcc) stats() HeadStats {
	nan := math.NaN()
	s := HeadStats{EntropyMean: nan, EntropyMin: nan, ScoreMax: a.scoreMax, ScoreMin: a.scoreMin, PosRMS: nan, OneHot: nan, Rows: a.rows}
	if a.rows > 0 {
		s.EntropyMean = a.entSum / float64(a.rows)
		s.EntropyMin = a.entMin
		s.OneHot = float64(a.oneHot) / float64(a.rows)
	}
	if a.nanScore {
		s.ScoreMax, s.ScoreMin = nan, nan
	}
	if math.IsInf(s.ScoreMax, -1) { // no allowed entry at all
		s.ScoreMax, s.ScoreMin = nan, nan
	}
	if a.hasPos && a.posN > 0 {
		s.PosRMS = math.Sqrt(a.posSq / float64(a.posN))
	}
	return s
}

// probeScores records one row of final scores (before the mask is
// applied): the extremes over the allowed entries and the position part
// scale*terms + bias of each (terms and bias nil if absent; bias is read
// at boff + j*bstep, the mask at moff + j*mstep). It returns the number of
// allowed entries.
func probeScores[T float](a *headAcc, row, terms []T, scale T, bias []T, boff, bstep int, mask []T, moff, mstep int) int {
	n := 0
	a.hasPos = a.hasPos || terms != nil || bias != nil
	for j, v := range row {
		if mask != nil && mask[moff+j*mstep] == 0 {
			continue
		}
		n++
		x := float64(v)
		if x != x {
			a.nanScore = true
		}
		a.scoreMax = math.Max(a.scoreMax, x)
		a.scoreMin = math.Min(a.scoreMin, x)
		if terms != nil || bias != nil {
			var pos T
			if terms != nil {
				pos = terms[j] * scale
			}
			if bias != nil {
				pos += bias[boff+j*bstep]
			}
			a.posSq += float64(pos) * float64(pos)
			a.posN++
		}
	}
	return n
}

// probeProbs records the entropy and the largest probability of a row of
// probabilities whose query may attend to allowed keys (rows with fewer
// than two are not counted).
func probeProbs[T float](a *headAcc, row []T, allowed int) {
	if allowed < 2 {
		return
	}
	var ent, top float64
	for _, v := range row {
		p := float64(v)
		if p != p {
			ent = math.NaN()
		}
		if p > 0 {
			ent -= p * math.Log(p)
		}
		top = math.Max(top, p)
	}
	a.entSum += ent
	a.entMin = math.Min(a.entMin, ent)
	if top >= OneHotThreshold {
		a.oneHot++
	}
	a.rows++
}
