package stabilitystudy

import (
	"math"
	"os"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/study"
	"github.com/rpe-go/rpe/experiments/trainer"
)

// setMonitor turns the attention monitor of a run on (every > 0): the
// engine writes trainer.MonitorPath(ckpt).
func setMonitor(ro *trainer.RunOptions, every int) { ro.MonitorEvery = every }

// nonFinite returns the update at which a run failed on a non-finite loss,
// gradient norm or weights (trainer.NonFiniteError) and the engine's
// message; ok is false for any other error.
func nonFinite(err error) (step int, why string, ok bool) {
	var nf *trainer.NonFiniteError
	if !errors.As(err, &nf) {
		return 0, "", false
	}
	return nf.Step, "non-finite " + nf.What, true
}

// monitorPath is the monitor log of a checkpoint.
func monitorPath(ckpt string) string { return trainer.FindMonitorPath(ckpt) }

// monitorSummary sets the monitor figures of r from the monitor log of
// ckpt (NaN without one): the smallest EntropyMin, the largest |score|
// (ScoreMax or -ScoreMin), PosRMS and OneHot over every record, finite
// values only.
func monitorSummary(ckpt string, r *Row) error {
	nan := Num(math.NaN())
	r.MinEntropy, r.MaxAbsScore, r.MaxPosRMS, r.MaxOneHot = nan, nan, nan, nan
	recs, err := trainer.ReadMonitor(monitorPath(ckpt))
	if os.IsNotExist(errors.Cause(err)) {
		return nil
	}
	if err != nil {
		return err
	}
	minEnt, score, rms, oh := math.NaN(), math.NaN(), math.NaN(), math.NaN()
	r.Monitor = nil
	var entSum float64
	var entN int
	for _, m := range recs {
		minEnt = -nanMax(-minEnt, finiteOrNaN(-m.EntropyMin))
		score = nanMax(score, finiteOrNaN(math.Max(math.Abs(m.ScoreMax), math.Abs(m.ScoreMin))))
		rms = nanMax(rms, finiteOrNaN(m.PosRMS))
		oh = nanMax(oh, finiteOrNaN(m.OneHot))
		if n := len(r.Monitor); n == 0 || r.Monitor[n-1].Step != m.Step {
			nan := Num(math.NaN())
			r.Monitor = append(r.Monitor, MonitorPoint{Step: m.Step, MinEntropy: nan, MeanEntropy: nan, MaxAbsScore: nan, MaxPosRMS: nan, MaxOneHot: nan})
			entSum, entN = 0, 0
		}
		pt := &r.Monitor[len(r.Monitor)-1]
		pt.MinEntropy = Num(-nanMax(-float64(pt.MinEntropy), finiteOrNaN(-m.EntropyMin)))
		pt.MaxAbsScore = Num(nanMax(float64(pt.MaxAbsScore), finiteOrNaN(math.Max(math.Abs(m.ScoreMax), math.Abs(m.ScoreMin)))))
		pt.MaxPosRMS = Num(nanMax(float64(pt.MaxPosRMS), finiteOrNaN(m.PosRMS)))
		pt.MaxOneHot = Num(nanMax(float64(pt.MaxOneHot), finiteOrNaN(m.OneHot)))
		if e := m.EntropyMean; !math.IsNaN(e) && !math.IsInf(e, 0) {
			entSum, entN = entSum+e, entN+1
			pt.MeanEntropy = Num(entSum / float64(entN))
		}
	}
	r.MinEntropy, r.MaxAbsScore, r.MaxPosRMS, r.MaxOneHot = Num(minEnt), Num(score), Num(rms), Num(oh)
	return nil
}

// finiteOrNaN is v, or NaN if v is infinite.
func finiteOrNaN(v float64) float64 {
	if math.IsInf(v, 0) {
		return math.NaN()
	}
	return v
}

// drawMonitor draws the monitor records of src (a monitor.csv) with
// trainer.MonitorPNG into path.
func drawMonitor(src, title, path string) error {
	recs, err := trainer.ReadMonitor(src)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	png, err := trainer.MonitorPNG(recs, title)
	if err != nil {
		return err
	}
	return study.WriteFileAtomic(path, png)
}
