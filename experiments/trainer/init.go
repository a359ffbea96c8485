package trainer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/internal/fields"
	"github.com/rpe-go/rpe/posenc"
)

// InitInfo records where the initial weights of a run came from
// (RunOptions.InitFrom): a new run, not a resumption, whose weights were
// copied from another run's checkpoint or exported weights file. The
// checkpoints of the run carry it (metadata "init_from"), so a resumed
// fine-tuning is known to be one and can be checked against its source.
type InitInfo struct {
	// Path is the source file as given, SHA256 the hash of its bytes.
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	// Kind is "checkpoint" or "weights".
	Kind string `json:"kind"`
	// Step is the source checkpoint's step (-1 for a weights file, which
	// does not record one).
	Step int `json:"step"`
	// Config is the source's resolved configuration; CorpusHash the
	// SHA-256 of the data it was trained on ("" if not recorded).
	Config     Config `json:"config"`
	CorpusHash string `json:"corpus_sha256,omitempty"`
}

// InitRules lists what a run initialised from another run's weights
// (RunOptions.InitFrom) may change: the Refused model options must be
// equal, since weights of the same shapes would mean something else under
// them; everything else — the sequence length, batch, seed, steps,
// schedule, optimizer, dtype, data, the position encoding and its options —
// may differ, as long as the model has exactly the source's parameters,
// name by name and shape by shape (a learned table of another max-len, or
// T5 with other buckets, is refused naming the parameter). The optimizer
// state and the step start from zero.
var InitRules = struct{ Refused []string }{
	Refused: []string{"vocab", "d-model", "heads", "layers", "ffn", "eps", "causal"},
}

// fileHash returns the SHA-256 of the file at path, in hex.
func fileHash(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:]), nil
}

// initSource is the content of an InitFrom file.
type initSource struct {
	info       InitInfo
	params     map[string]Tensor
	task       string
	taskConfig []byte
}

// readInitSource reads a checkpoint or an exported weights file.
func readInitSource(path string) (*initSource, error) {
	kind, _, err := FileFormat(path)
	if err != nil {
		return nil, errors.WithMessage(err, "-init-from")
	}
	sum, err := fileHash(path)
	if err != nil {
		return nil, errors.Wrap(err, "-init-from")
	}
	s := &initSource{info: InitInfo{Path: path, SHA256: sum, Kind: kind}}
	switch kind {
	case "checkpoint":
		ck, err := LoadCheckpoint(path)
		if err != nil {
			return nil, errors.WithMessage(err, "-init-from")
		}
		s.info.Step, s.info.Config, s.info.CorpusHash = ck.Step, ck.Config.Resolved(), ck.CorpusHash
		s.params, s.task, s.taskConfig = ck.Params, ck.kind(), ck.TaskConfig
	case "weights":
		w, err := LoadWeights(path)
		if err != nil {
			return nil, errors.WithMessage(err, "-init-from")
		}
		s.info.Step, s.info.Config = -1, w.Config.Resolved()
		s.params, s.task, s.taskConfig = w.Params, w.Task, w.TaskConfig
		if s.task == "" {
			s.task = lmKind
		}
	default:
		return nil, errors.Errorf("-init-from %s: a %s file holds no weights to start from (want a checkpoint or an exported weights file)", path, kind)
	}
	return s, nil
}

// ReadInit reads the checkpoint or exported weights file at path and
// returns what a run started from it records (InitInfo: its hash, step and
// configuration). Errors name the file.
func ReadInit(path string) (*InitInfo, error) {
	s, err := readInitSource(path)
	if err != nil {
		return nil, err
	}
	return &s.info, nil
}

// check refuses a source whose task, task configuration or model
// options of InitRules.Refused differ from the run's.
func (s *initSource) check(cfg Config, task Task) error {
	if s.task != task.Kind() {
		return errors.Errorf("-init-from %s is a model of task %q; this run trains %q", s.info.Path, s.task, task.Kind())
	}
	if tc, ok := task.(TaskConfigurer); ok {
		if err := tc.CheckTaskConfig(s.taskConfig); err != nil {
			return errors.WithMessagef(err, "-init-from %s: a model of another %s configuration", s.info.Path, task.Kind())
		}
	}
	_, a := cfg.optionValues()
	_, b := s.info.Config.optionValues()
	var have, want []string
	for _, k := range InitRules.Refused {
		if a[k] != b[k] {
			have = append(have, k+"="+b[k])
			want = append(want, k+"="+a[k])
		}
	}
	if len(have) > 0 {
		return errors.Errorf("-init-from %s was trained with %s; this run asks for %s (starting from other weights keeps %s)",
			s.info.Path, strings.Join(have, ", "), strings.Join(want, ", "), strings.Join(InitRules.Refused, ", "))
	}
	return nil
}

// initFrom copies the weights of the source into the trainer and records
// the source; the optimizer state and step stay those of a new run.
func (t *Trainer) initFrom(s *initSource) error {
	if err := s.check(t.Cfg, t.Task); err != nil {
		return err
	}
	ck := &Checkpoint{Params: s.params}
	if err := ck.RestoreParams(t.Params); err != nil {
		return errors.WithMessagef(err, "-init-from %s", s.info.Path)
	}
	info := s.info
	t.Init = &info
	return nil
}

// describeInit is the log line of a run initialised from s: the source and
// what this run changes relative to it.
func describeInit(info *InitInfo, cfg Config) string {
	at := fmt.Sprintf("step %d", info.Step)
	if info.Step < 0 {
		at = "exported weights"
	}
	out := fmt.Sprintf("initialised from %s (%s, sha256 %.12s); a new run: optimizer state and step start at zero", info.Path, at, info.SHA256)
	names, a := cfg.optionValues()
	_, b := info.Config.optionValues()
	var ch []string
	for _, k := range names {
		if a[k] != b[k] {
			ch = append(ch, k+" "+b[k]+" -> "+a[k])
		}
	}
	if len(ch) > 0 {
		out += "\nthis run changes: " + strings.Join(ch, ", ")
	}
	return out
}

// checkResumedInit refuses to resume checkpoint ck (at path) with
// -init-from src unless ck is a run initialised from a file with the same
// bytes as src.
func checkResumedInit(ck *Checkpoint, path, src string) error {
	if src == "" {
		return nil
	}
	sum, err := fileHash(src)
	if err != nil {
		return errors.Wrap(err, "-init-from")
	}
	switch {
	case ck.Init == nil:
		return errors.Errorf("checkpoint %s is not a run initialised from other weights, and this run asks -init-from %s: drop -init-from to resume it, or pass -fresh to start a new run from %s",
			path, src, src)
	case ck.Init.SHA256 != sum:
		return errors.Errorf("checkpoint %s was initialised from %s (sha256 %.12s); -init-from %s has sha256 %.12s: pass -fresh to start a new run from it, or choose another -ckpt",
			path, ck.Init.Path, ck.Init.SHA256, src, sum)
	}
	return nil
}

// encodeInit is the "init_from" metadata of a checkpoint ("" for none).
func encodeInit(info *InitInfo) (string, error) {
	if info == nil {
		return "", nil
	}
	b, err := json.Marshal(info)
	return string(b), errors.Wrap(err, "encoding init_from")
}

// decodeInit parses the "init_from" metadata of a checkpoint.
func decodeInit(s string) (*InitInfo, error) {
	if s == "" {
		return nil, nil
	}
	var info InitInfo
	if err := json.Unmarshal([]byte(s), &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// InitConfig returns the configuration of a run that starts from the weights
// of a run trained with src when the command line asked for cfg (explicit
// telling which options were given, ConfigFlags.Explicit): src's resolved
// configuration with every explicitly given option taken from cfg (those of
// InitRules.Refused must then equal src's: the error names them), and the
// length-dependent options re-resolved for the new sequence length where
// they were not given:
//
//   - max-len follows seq-len if it did in src (a learned table of another
//     length then has another shape, which the run refuses naming it);
//   - when the source is plain RoPE ("rope") trained at L and the new run uses
//     one of RoPE's scalings at L' = seq-len, rope-train-len becomes L and
//     rope-scale L'/L (position interpolation fine-tuned at L', Chen et al.
//     2023; YaRN, Peng et al. 2023). A source that already uses a scaling
//     keeps its values.
//
// The steps, schedule and seed are the new run's (cfg's when given, else
// src's). The result is what the run records in its checkpoints.
func InitConfig(src, cfg Config, explicit func(name string) bool) (Config, error) {
	out := src.Resolved()
	names, want := cfg.optionValues()
	_, have := out.optionValues()
	refused := map[string]bool{}
	for _, k := range InitRules.Refused {
		refused[k] = true
	}
	var conflicts []string
	for _, k := range names {
		if !explicit(k) || want[k] == have[k] {
			continue
		}
		if refused[k] {
			conflicts = append(conflicts, "-"+k+" "+want[k]+" conflicts with the source's "+k+"="+have[k])
			continue
		}
		if k == "dtype" {
			out.Dtype = cfg.Dtype
			continue
		}
		if err := fields.Set(&out, k, want[k]); err != nil {
			return out, errors.WithMessage(err, "flag -"+k)
		}
	}
	if len(conflicts) > 0 {
		return out, errors.Errorf("%s; starting from other weights keeps %s", strings.Join(conflicts, "; "), strings.Join(InitRules.Refused, ", "))
	}
	s := src.Resolved()
	if !explicit("max-len") && s.Model.PosOpts.MaxLen == s.SeqLen {
		out.Model.PosOpts.MaxLen = out.SeqLen
	}
	if s.Model.Pos == posenc.RopePlain && out.Model.Pos != posenc.RopePlain && strings.HasPrefix(out.Model.Pos, posenc.RopePlain+"-") {
		if !explicit("rope-train-len") {
			out.Model.PosOpts.RopeTrainLen = s.SeqLen
		}
		if !explicit("rope-scale") {
			out.Model.PosOpts.RopeScale = float64(out.SeqLen) / float64(s.SeqLen)
		}
	}
	return out.Resolved(), nil
}

// sameFile reports whether a and b name the same file (by path, or by
// os.SameFile when both exist).
func sameFile(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}
