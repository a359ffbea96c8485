package trainer

import (
	"strings"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/internal/fields"
)

// ResumeConfig returns the configuration of a run resuming a checkpoint
// trained with ck when the command line asked for cfg, explicit telling
// which options were given (ConfigFlags.Explicit): ck's configuration,
// with the explicitly given options resuming allows (ResumeRules.Allowed:
// steps, the learning-rate schedule, the optimizer settings, clipping,
// evaluation, stream) taken from cfg. Options not given keep the
// checkpoint's values, not the defaults. An explicit option that resuming
// does not allow and whose value differs from the checkpoint's is an
// error naming both ("-d-model 64 conflicts with the checkpoint's
// d-model=128; resuming keeps the model: drop the flag or start over with
// -fresh"); one equal to the checkpoint's is accepted.
func ResumeConfig(ck, cfg Config, explicit func(name string) bool) (Config, error) {
	out := ck.Resolved()
	names, want := cfg.optionValues()
	_, have := out.optionValues()
	var conflicts []string
	for _, k := range names {
		if !explicit(k) || want[k] == have[k] {
			continue
		}
		if !resumeAllowed[k] {
			conflicts = append(conflicts, "-"+k+" "+want[k]+" conflicts with the checkpoint's "+k+"="+have[k])
			continue
		}
		if err := fields.Set(&out, k, want[k]); err != nil {
			return out, errors.WithMessage(err, "flag -"+k)
		}
	}
	if len(conflicts) > 0 {
		return out, errors.Errorf("%s; resuming keeps the model, batch, seq-len, seed and dtype: drop the flag or start over with -fresh",
			strings.Join(conflicts, "; "))
	}
	return out, nil
}
