package stabilitystudy

import (
	"math"
	"slices"
	"strconv"

	"github.com/rpe-go/rpe/experiments/study"
)

// Remedy is one of the survey's remedies as an axis of the grid: Get reads
// a row's value of the axis, On is the value with the remedy, Off without.
type Remedy struct {
	// Name is "init", "alpha" or "clip"; Title says what is compared
	// ("init std 0.02 vs 1").
	Name, Title string
	Get         func(Row) string
	On, Off     string
}

// Remedies are the remedies of the plan's axes with two values: small init
// (InitStds[0] vs InitStds[1]), alpha (on vs off) and clipping (the
// non-zero clip vs the other).
func (p Plan) Remedies() []Remedy {
	var out []Remedy
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	if len(p.InitStds) == 2 {
		on, off := num(p.InitStds[0]), num(p.InitStds[1])
		out = append(out, Remedy{Name: "init", Title: "init std " + on + " vs " + off, Get: func(r Row) string { return r.InitStd }, On: on, Off: off})
	}
	if len(p.Alphas) == 2 {
		out = append(out, Remedy{Name: "alpha", Title: "alpha on vs off", Get: func(r Row) string { return r.Alpha }, On: "on", Off: "off"})
	}
	if len(p.Clips) == 2 {
		on, off := p.Clips[1], p.Clips[0]
		if on == 0 {
			on, off = off, on
		}
		s := Setting{Clip: on}
		o := Setting{Clip: off}
		out = append(out, Remedy{Name: "clip", Title: "clip " + s.ClipName() + " vs " + o.ClipName(), Get: func(r Row) string { return r.Clip }, On: s.ClipName(), Off: o.ClipName()})
	}
	return out
}

// Effect is the paired effect of a remedy on one encoding at one learning
// rate: runs are paired when they differ only in the remedy's axis (same
// other axes and seed), and each difference is (with remedy) - (without).
type Effect struct {
	Encoding string
	Remedy   string
	LR       float64
	// NA is set when the axis does not change the encoding (its rows have
	// the value n/a).
	NA bool
	// Pairs is the number of matched pairs.
	Pairs int
	// Val is the mean and sample standard deviation of the differences of
	// validation bits per byte over the ValN pairs in which neither run
	// diverged.
	ValMean, ValStd Num
	ValN            int
	// Spikes and GradSpikes: mean and std of the differences in the
	// number of spikes over every pair.
	SpikesMean, SpikesStd         Num
	GradSpikesMean, GradSpikesStd Num
	// DivOn and DivOff count the diverged runs among the paired runs with
	// and without the remedy.
	DivOn, DivOff int
}

// pairKey identifies a run up to one axis: encoding, the other axes, lr
// and seed.
type pairKey struct {
	enc, init, alpha, clip, lr string
	seed                       int64
}

// Effects computes the effect of every remedy of the plan on every
// encoding of the rows at every learning rate, in the rows' encoding
// order, then remedy, then lr (the plan's order).
func Effects(p Plan, rows []Row) []Effect {
	var encs []string
	for _, r := range rows {
		if !slices.Contains(encs, r.Encoding) {
			encs = append(encs, r.Encoding)
		}
	}
	var out []Effect
	for _, enc := range encs {
		for _, rm := range p.Remedies() {
			for _, lr := range p.LRs {
				out = append(out, effect(rows, enc, rm, lr))
			}
		}
	}
	return out
}

// effect is the effect of remedy rm on encoding enc at lr.
func effect(rows []Row, enc string, rm Remedy, lr float64) Effect {
	e := Effect{Encoding: enc, Remedy: rm.Name, LR: lr}
	on, off := map[pairKey]Row{}, map[pairKey]Row{}
	for _, r := range rows {
		if r.Encoding != enc || r.LR != lr {
			continue
		}
		v := rm.Get(r)
		if v == NA {
			e.NA = true
		}
		k := pairKey{enc: enc, init: r.InitStd, alpha: r.Alpha, clip: r.Clip, lr: strconv.FormatFloat(r.LR, 'g', -1, 64), seed: r.Seed}
		switch rm.Name { // blank the remedy's own axis
		case "init":
			k.init = ""
		case "alpha":
			k.alpha = ""
		case "clip":
			k.clip = ""
		}
		switch v {
		case rm.On:
			on[k] = r
		case rm.Off:
			off[k] = r
		}
	}
	var dv, ds, dg []float64
	for k, a := range on {
		b, ok := off[k]
		if !ok {
			continue
		}
		e.Pairs++
		if a.Diverged() {
			e.DivOn++
		}
		if b.Diverged() {
			e.DivOff++
		}
		if !math.IsNaN(float64(a.Val)) && !math.IsNaN(float64(b.Val)) {
			dv = append(dv, float64(a.Val-b.Val))
		}
		ds = append(ds, float64(a.Spikes-b.Spikes))
		dg = append(dg, float64(a.GradSpikes-b.GradSpikes))
	}
	e.ValN = len(dv)
	e.ValMean, e.ValStd = meanStd(dv)
	e.SpikesMean, e.SpikesStd = meanStd(ds)
	e.GradSpikesMean, e.GradSpikesStd = meanStd(dg)
	return e
}

// meanStd is study.MeanStd of v summed in sorted order, so that the
// result does not depend on the order of the pairs (map order).
func meanStd(v []float64) (Num, Num) {
	slices.Sort(v)
	m, s := study.MeanStd(v)
	return Num(m), Num(s)
}
