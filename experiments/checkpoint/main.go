// Command checkpoint uses a checkpoint written by experiments/train (or the
// extrapolation study):
//
//	go run ./experiments/checkpoint eval -ckpt F [-len 64,128,...] [-protocol P ...] [-last-n K] [-corpus C] [-batch B] [-max-windows W] [-stream[=false]] [-mem-limit GiB]
//	go run ./experiments/checkpoint sample -ckpt F -len N -prompt P [-prompt P2 ...] -temp T [-top-k K] [-top-p P] [-stop S] [-sinks S] [-no-cache] [-seed S] [-mem-limit GiB]
//	go run ./experiments/checkpoint export -ckpt F -out W [-force]
//	go run ./experiments/checkpoint info -ckpt F|W
//
// eval prints the validation bits per byte at each window length (default:
// the training length) over the whole validation split of the checkpoint's
// corpus (trainer.Evaluator.Score; -last-n K adds the protocol scoring only
// the last K targets of each window). The corpus is the one recorded in the
// checkpoint, checked against its SHA-256: a changed file is refused unless
// -corpus is given explicitly.
//
// -protocol (repeatable) says how each window of Le bytes is scored
// (trainer.Protocol; docs/evaluation.md): full (the default,
// one pass over the window), chunks[:W] (independent chunks of W),
// stride[:W[:S]] (windows of W every S, each target with >= W-S context),
// memory[:W[:M]] (segments of W attending to M states of the segment
// before, Transformer-XL's recurrence for any encoding) and sinks[:W[:S]]
// (token by token through a sliding key/value cache of W keeping S first
// positions). W defaults to the training length. Every protocol scores the
// same targets, so their bits per byte compare directly; eval prints each
// one's time and targets per second.
//
// Before anything is evaluated, eval plans every length (plan.go,
// planEval): a window longer than the validation text is refused naming
// -len, and the graph's memory is estimated (trainer.EstimateEvalMemory)
// and compared with -mem-limit GiB (default: the machine's MemAvailable).
// -stream chooses the attention: auto (the default) keeps the materialised
// attention up to an estimate of 1 GiB and streams above it
// (graph.StreamAttention, O(T) memory) when the encoding can; -stream
// forces streaming (refused, naming the encoding, if it cannot);
// -stream=false forces the materialised attention. A graph over the memory
// is refused (exit 2) with its estimate, the memory available and the
// flag that helps. eval prints each length's choice and estimate, and the
// peak RSS at the end.
//
// sample continues one prompt, printing the bytes as they come, or a
// batch of prompts (-prompt repeated), decoded together (trainer.Generate):
// with the key/value cache where the encoding allows it (layers.Decoder;
// past the training length the cache slides and keeps -sinks first
// positions), else recomputing the window per byte, with the reason on
// stderr. -temp (finite; <= 0 greedy), -top-k and -top-p shape the
// distribution; -stop ends a sequence. The rate (bytes/s) goes to stderr.
//
// export writes the weights alone (trainer.ExportCheckpoint), atomically
// (a temporary file renamed over W, so an interrupted export leaves the old
// W intact); info prints the kind, the configuration, the step, the provenance, the corpus
// hash and the parameters of a checkpoint, or the kind, configuration and
// parameters of an exported weights file.
//
// export refuses (exit 2), unless -force, a W that is the checkpoint F
// itself, that holds a training checkpoint, or that exists and is not an
// exported weights file; a W that is a directory or not a regular file is
// always refused.
//
// A checkpoint records the kind of its model (trainer.Task.Kind; "lm" in
// older files). eval and sample serve the byte language model ("lm") only:
// given a checkpoint of another kind (a ViT, a graph Transformer, ...) they
// exit with status 2 naming the kind and the command that serves it
// (trainer.KindOf). export and info take every kind.
//
// Every subcommand prints the BLAS in use on stderr first. Bad usage exits
// with status 2, a failure with status 1.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/experiments/corpora"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/posenc"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// usageError is bad usage: exit status 2.
type usageError struct{ error }

func run(args []string, stdout, stderr io.Writer) int {
	const help = "usage: checkpoint eval|sample|export|info -ckpt FILE [flags] (checkpoint <subcommand> -h for its flags)"
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprintln(stderr, help)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmds := map[string]func([]string, io.Writer, io.Writer) error{"eval": evalCmd, "sample": sampleCmd, "export": exportCmd, "info": infoCmd}
	f, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "checkpoint: unknown subcommand %q\n%s\n", args[0], help)
		return 2
	}
	fmt.Fprintf(stderr, "checkpoint: %s\n", trainer.Provenance())
	err := f(args[1:], stdout, stderr)
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "checkpoint %s: %v\n", args[0], err)
		return 2
	}
	fmt.Fprintf(stderr, "checkpoint %s: %v\n", args[0], err)
	return 1
}

// parse parses the flags of a subcommand; -ckpt is required.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer, ckpt *string) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{errors.Errorf("unexpected arguments %q", fs.Args())}
	}
	if *ckpt == "" {
		return usageError{errors.New("-ckpt is required")}
	}
	return nil
}

// protocolList is the repeatable -protocol flag.
type protocolList []string

func (l *protocolList) String() string { return strings.Join(*l, ",") }
func (l *protocolList) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// lengths is a repeatable, comma-separated list of window lengths.
type lengths []int

func (l *lengths) String() string { return fmt.Sprint(*l) }
func (l *lengths) Set(s string) error {
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return errors.Errorf("length %q must be a positive integer", f)
		}
		*l = append(*l, n)
	}
	return nil
}

func evalCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	ckpt := fs.String("ckpt", "", "checkpoint file")
	var lens lengths
	fs.Var(&lens, "len", "window length(s) Le, comma-separated or repeated (default: the training length)")
	lastN := fs.Int("last-n", 0, "also score only the last K targets of each window (0: no)")
	corpus := fs.String("corpus", "", "text whose validation split (last 10%) is scored (default: the checkpoint's corpus, hash checked)")
	batch := fs.Int("batch", 8, "windows per forward pass")
	maxW := fs.Int("max-windows", 0, "score only the first N full windows (0: the whole text)")
	var stream streamMode
	fs.Var(&stream, "stream", "streaming attention, O(T) memory: auto (stream when the materialised graph would need more than 1 GiB), true or false")
	memLimit := fs.Float64("mem-limit", 0, "GiB the evaluation may use (0: the machine's MemAvailable)")
	var protoArgs protocolList
	fs.Var(&protoArgs, "protocol", "how each window is scored, repeatable: full (default), chunks[:W], stride[:W[:S]], memory[:W[:M]], sinks[:W[:S]]; "+
		"W defaults to the training length, S (stride) to W/2, M to W, S (sinks) to 4 (see trainer.Protocol)")
	if err := parse(fs, args, stderr, ckpt); err != nil {
		return err
	}
	if *lastN < 0 || *batch <= 0 || *maxW < 0 {
		return usageError{errors.Errorf("-last-n %d and -max-windows %d must not be negative, -batch %d positive", *lastN, *maxW, *batch)}
	}
	avail, err := availMemory(*memLimit)
	if err != nil {
		return err
	}
	ck, err := trainer.LoadCheckpoint(*ckpt)
	if err != nil {
		return err
	}
	if err := requireLM(*ckpt, ck); err != nil {
		return err
	}
	p, cfg, err := trainer.LoadModel(*ckpt)
	if err != nil {
		return err
	}
	var c *trainer.Corpus
	if *corpus != "" {
		if c, err = corpora.Open(*corpus); err != nil {
			return usageError{err}
		}
		if ck.CorpusHash != "" && c.Hash() != ck.CorpusHash {
			fmt.Fprintf(stderr, "note: %s is not the training corpus (SHA-256 %s, checkpoint %s)\n", *corpus, c.Hash(), ck.CorpusHash)
		}
	} else {
		if c, err = corpora.Open(ck.CorpusPath); err != nil {
			return errors.WithMessage(err, "the checkpoint's corpus (pass -corpus)")
		}
		if ck.CorpusHash != "" && c.Hash() != ck.CorpusHash {
			return errors.Errorf("corpus %s has SHA-256 %s, but the checkpoint was trained on SHA-256 %s; pass -corpus explicitly to evaluate on this text anyway",
				c.Path, c.Hash(), ck.CorpusHash)
		}
	}
	if len(lens) == 0 {
		lens = lengths{cfg.SeqLen}
	}
	if len(protoArgs) == 0 {
		protoArgs = protocolList{"full"}
	}
	protocols := make([]trainer.Protocol, len(protoArgs))
	for i, a := range protoArgs {
		if protocols[i], err = trainer.ParseProtocol(a, cfg.SeqLen); err != nil {
			return usageError{errors.WithMessage(err, "-protocol")}
		}
	}
	protos := []int{0}
	if *lastN > 0 {
		protos = append(protos, *lastN)
	}
	// Every length is planned before anything is evaluated: a text too
	// short or a graph over the memory is refused before allocating.
	type job struct {
		le    int
		proto trainer.Protocol
		plan  evalPlan
	}
	var jobs []job
	var streamErr error
	if stream != streamOff {
		streamErr = trainer.StreamError(cfg.Model)
	}
	for _, le := range lens {
		if trainer.Windows(len(c.Val), le) == 0 {
			return usageError{errors.Errorf("-len %d: the validation text (%s, %d bytes) is too short for one window of %d+1 bytes; use a smaller -len or a longer -corpus",
				le, c.Path, len(c.Val), le)}
		}
		if *lastN > le {
			return usageError{errors.Errorf("-last-n %d is longer than the window -len %d", *lastN, le)}
		}
		b := trainer.RunBatch(len(c.Val), trainer.EvalOptions{Len: le, Batch: *batch, MaxWindows: *maxW}, true)
		for _, proto := range protocols {
			if err := proto.Check(le); err != nil {
				return usageError{errors.WithMessagef(err, "-protocol with -len %d", le)}
			}
			pl, err := planEval(planInput{Model: cfg.Model, Batch: b, Len: proto.GraphLen(le), DtypeSize: int(p.Dtype().Size()), Avail: avail,
				Mode: stream, StreamErr: streamErr})
			if err != nil {
				return err
			}
			jobs = append(jobs, job{le, proto, pl})
		}
	}
	fmt.Fprintf(stdout, "checkpoint %s (step %d, pos=%s, L=%d); corpus %s: %d validation bytes\n", *ckpt, ck.Step, cfg.Model.Pos, cfg.SeqLen,
		c.Path, len(c.Val))
	for _, jb := range jobs {
		le, pl := jb.le, jb.plan
		model := cfg.Model
		model.Stream = pl.Stream
		attn := "materialised attention"
		if pl.Stream {
			attn = "streaming attention"
		}
		mem := "available memory unknown"
		if avail > 0 {
			mem = bytesString(avail) + " available"
		}
		tag := fmt.Sprintf("Le=%d", le)
		if len(protocols) > 1 || jb.proto.String() != "full" {
			tag = fmt.Sprintf("Le=%d %s", le, jb.proto)
		}
		fmt.Fprintf(stdout, "%s (%s): %s (%s); estimated %s, %s\n", tag, jb.proto.Describe(), attn, pl.Why, bytesString(pl.Estimate.Total), mem)
		t0 := time.Now()
		ss, err := trainer.ScoreText(p, model, c.Val, protos, trainer.EvalOptions{Len: le, Batch: *batch, MaxWindows: *maxW, Protocol: jb.proto})
		if errors.Is(err, posenc.ErrBeyondTable) {
			fmt.Fprintf(stdout, "%s: n/a (%v)\n", tag, err)
			continue
		}
		if err != nil {
			return errors.WithMessagef(err, "Le=%d", le)
		}
		took := time.Since(t0)
		for i, s := range ss {
			what := "all targets"
			if protos[i] > 0 {
				what = fmt.Sprintf("last %d of each window", protos[i])
			}
			fmt.Fprintf(stdout, "%s %s: %.4f bits/byte, perplexity %.3f (%d targets, %d windows)\n", tag, what, s.BitsPerByte(),
				s.Perplexity(), s.Tokens, s.Windows)
		}
		fmt.Fprintf(stdout, "%s time: %.2f s, %.0f targets/s\n", tag, took.Seconds(), float64(ss[0].Tokens)/took.Seconds())
	}
	if rss, ok := trainer.PeakRSS(); ok {
		fmt.Fprintf(stdout, "peak RSS: %s\n", bytesString(rss))
	}
	return nil
}

// availMemory is the memory an evaluation or a sample may use: -mem-limit
// GiB if positive, else the machine's MemAvailable (0 if unknown).
func availMemory(limitGiB float64) (float64, error) {
	if math.IsNaN(limitGiB) || math.IsInf(limitGiB, 0) || limitGiB < 0 {
		return 0, usageError{errors.Errorf("-mem-limit %v GiB must be a finite number >= 0 (0: the machine's MemAvailable)", limitGiB)}
	}
	if limitGiB > 0 {
		return limitGiB * (1 << 30), nil
	}
	avail, _ := trainer.MemAvailable()
	return avail, nil
}

// prompts is a repeatable -prompt flag.
type prompts []string

func (p *prompts) String() string { return strings.Join(*p, ", ") }
func (p *prompts) Set(v string) error {
	*p = append(*p, v)
	return nil
}

func sampleCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sample", flag.ContinueOnError)
	ckpt := fs.String("ckpt", "", "checkpoint file")
	n := fs.Int("len", 200, "bytes to generate per prompt")
	var ps prompts
	fs.Var(&ps, "prompt", "text to continue; repeat for a batch of prompts decoded together (default \"Light \")")
	temp := fs.Float64("temp", 0.8, "sampling temperature (<= 0: greedy; finite)")
	topK := fs.Int("top-k", 0, "keep the K most probable bytes (0: all)")
	topP := fs.Float64("top-p", 1, "keep the smallest set of bytes whose probability reaches P, in (0, 1] (1: all)")
	stop := fs.String("stop", "", "end a sequence once its output ends with this string (included)")
	sinks := fs.Int("sinks", 4, "first positions kept once the context exceeds the training length (attention sinks)")
	noCache := fs.Bool("no-cache", false, "recompute the window for every byte instead of the key/value cache")
	seed := fs.Uint64("seed", 1, "seed of the sampling generator (prompt i uses seed+i)")
	memLimit := fs.Float64("mem-limit", 0, "GiB sampling may use (0: the machine's MemAvailable)")
	if err := parse(fs, args, stderr, ckpt); err != nil {
		return err
	}
	if len(ps) == 0 {
		ps = prompts{"Light "}
	}
	if *n < 0 {
		return usageError{errors.Errorf("-len %d must not be negative", *n)}
	}
	if math.IsNaN(*temp) || math.IsInf(*temp, 0) {
		return usageError{errors.Errorf("-temp %v must be a finite number (<= 0: greedy)", *temp)}
	}
	if !(*topP > 0 && *topP <= 1) {
		return usageError{errors.Errorf("-top-p %v must be in (0, 1] (1: all bytes)", *topP)}
	}
	if *topK < 0 || *topK > 256 {
		return usageError{errors.Errorf("-top-k %d must be in [0, 256] (0: all bytes)", *topK)}
	}
	avail, err := availMemory(*memLimit)
	if err != nil {
		return err
	}
	if ck, err := trainer.LoadCheckpoint(*ckpt); err != nil {
		return err
	} else if err := requireLM(*ckpt, ck); err != nil {
		return err
	}
	p, cfg, err := trainer.LoadModel(*ckpt)
	if err != nil {
		return err
	}
	if *sinks < 0 || *sinks >= cfg.SeqLen-1 {
		return usageError{errors.Errorf("-sinks %d must be in [0, %d) for the training length %d", *sinks, cfg.SeqLen-1, cfg.SeqLen)}
	}
	opt := trainer.SampleOptions{N: *n, Temperature: *temp, TopK: *topK, TopP: *topP, Stop: []byte(*stop),
		Sinks: *sinks, NoCache: *noCache, Seed: *seed, Window: cfg.SeqLen}
	bs := make([][]byte, len(ps))
	for i, pr := range ps {
		bs[i] = []byte(pr)
		o := opt
		o.Prompt = bs[i]
		if e := trainer.EstimateSampleMemory(cfg.Model, o, int(p.Dtype().Size())); avail > 0 && e.Total > avail {
			return usageError{errors.Errorf("sampling needs about %s, more than the %s available (MemAvailable, or -mem-limit); use a shorter -prompt or -len", e, bytesString(avail))}
		}
	}
	// One prompt streams its bytes as they come; a batch prints each
	// output whole at the end.
	if len(bs) == 1 {
		fmt.Fprint(stdout, ps[0])
		opt.OnByte = func(_ int, b byte) error {
			_, err := stdout.Write([]byte{b})
			return err
		}
	}
	g, err := trainer.Generate(p, cfg.Model, bs, opt)
	if err != nil {
		return err
	}
	if len(bs) == 1 {
		fmt.Fprintln(stdout)
	} else {
		for i, out := range g.Out {
			fmt.Fprintf(stdout, "[%d] %s%s\n", i, ps[i], strings.ToValidUTF8(string(out), "\uFFFD"))
		}
	}
	how := "key/value cache"
	if !g.Cached {
		how = "recomputing the window per byte: " + g.Fallback
	}
	fmt.Fprintf(stderr, "sample: %d bytes in %.2f s (%.0f bytes/s; prompts %.2f s), %s\n", g.Tokens, g.Decode.Seconds(), g.TokensPerSecond(), g.Prefill.Seconds(), how)
	return nil
}

// requireLM returns a usage error naming the kind of ck (read from path)
// and the command that serves it unless ck holds a byte language model.
func requireLM(path string, ck *trainer.Checkpoint) error {
	if ck.Kind() == "lm" {
		return nil
	}
	k := trainer.KindOf(ck.Kind())
	return usageError{errors.Errorf("%s holds a %s model (%s), not a byte language model; %s", path, k.Kind, k.Model, k.Serving(path))}
}

func exportCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	ckpt := fs.String("ckpt", "", "checkpoint file")
	out := fs.String("out", "", "weights file to write (safetensors)")
	force := fs.Bool("force", false, "overwrite -out even if it is the checkpoint, another training checkpoint or another file")
	if err := parse(fs, args, stderr, ckpt); err != nil {
		return err
	}
	if *out == "" {
		return usageError{errors.New("-out is required")}
	}
	if err := checkExportOut(*out, *ckpt, *force); err != nil {
		return err
	}
	ck, err := trainer.LoadCheckpoint(*ckpt)
	if err != nil {
		return err
	}
	if err := trainer.ExportCheckpoint(*out, ck); err != nil {
		return err
	}
	total := 0
	for _, t := range ck.Params {
		total += len(t.Data)
	}
	k := trainer.KindOf(ck.Kind())
	fmt.Fprintf(stdout, "wrote %s: the weights of a %s model (%s), step %d: %d parameters in %d tensors\n", *out, k.Kind, k.Model, ck.Step,
		total, len(ck.Params))
	return nil
}

// checkExportOut returns a usage error if export must not write out (the
// -out of checkpoint -ckpt ckpt): a directory or a file that is not regular
// (always); unless force, the checkpoint itself, a file holding a training
// checkpoint, or an existing file that is not an exported weights file. A
// file that does not exist yet, or holds exported weights, may be written.
func checkExportOut(out, ckpt string, force bool) error {
	st, err := os.Stat(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return usageError{errors.Errorf("-out %s: %v", out, err)}
	}
	if st.IsDir() {
		return usageError{errors.Errorf("-out %s is a directory; name the weights file to write", out)}
	}
	if !st.Mode().IsRegular() {
		return usageError{errors.Errorf("-out %s is not a regular file (%v); name the weights file to write", out, st.Mode().Type())}
	}
	if force {
		return nil
	}
	if src, err := os.Stat(ckpt); err == nil && os.SameFile(st, src) {
		return usageError{errors.Errorf("-out %s is the checkpoint -ckpt %s: exporting would replace the training checkpoint (weights, optimizer state, step) by the weights alone; name another file (-force overwrites it)", out, ckpt)}
	}
	kind, format, err := trainer.FileFormat(out)
	switch {
	case err != nil:
		return usageError{errors.Errorf("-out %s exists and cannot be read to check what it holds (%v); -force overwrites it", out, err)}
	case kind == trainer.FormatCheckpoint:
		return usageError{errors.Errorf("-out %s holds a training checkpoint (%s); exporting would replace it by the weights alone; name another file (-force overwrites it)", out, format)}
	case kind != trainer.FormatWeights:
		return usageError{errors.Errorf("-out %s exists and is not an exported weights file; name another file (-force overwrites it)", out)}
	}
	return nil
}

func infoCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("info", flag.ContinueOnError)
	ckpt := fs.String("ckpt", "", "checkpoint file")
	if err := parse(fs, args, stderr, ckpt); err != nil {
		return err
	}
	if kind, _, err := trainer.FileFormat(*ckpt); err == nil && kind == trainer.FormatWeights {
		return weightsInfo(*ckpt, stdout)
	}
	ck, err := trainer.LoadCheckpoint(*ckpt)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "checkpoint %s\nformat: %s (training checkpoint)\nkind: %s; %s\nstep: %d of %d\n", *ckpt, ck.Format,
		trainer.KindOf(ck.Kind()), trainer.KindOf(ck.Kind()).Serving(*ckpt), ck.Step, ck.Config.Steps)
	corpus := ck.CorpusPath
	if corpus == "" {
		corpus = "(not recorded)"
	}
	hash := ck.CorpusHash
	if hash == "" {
		hash = "(not recorded)"
	}
	task := ck.Task
	if task == "" {
		task = "lm"
	}
	if task == "lm" {
		fmt.Fprintf(stdout, "corpus: %s, SHA-256 %s\n", corpus, hash)
	} else {
		fmt.Fprintf(stdout, "task: %s %s\ndata: %s, SHA-256 %s\n", task, ck.TaskConfig, corpus, hash)
	}
	if ck.Provenance.BLAS != "" {
		fmt.Fprintf(stdout, "written by: %s\n", ck.Provenance)
	}
	if in := ck.Init; in != nil {
		at := fmt.Sprintf("step %d", in.Step)
		if in.Step < 0 {
			at = "exported weights"
		}
		fmt.Fprintf(stdout, "initialised from: %s (%s, %s, SHA-256 %s), trained at seq-len %d with pos=%s\n",
			in.Path, in.Kind, at, in.SHA256, in.Config.SeqLen, in.Config.Model.Pos)
	}
	return printModel(stdout, ck.Config, ck.Params)
}

// weightsInfo prints what the exported weights file path holds.
func weightsInfo(path string, stdout io.Writer) error {
	w, err := trainer.LoadWeights(path)
	if err != nil {
		return err
	}
	k := trainer.KindOf(w.Task)
	fmt.Fprintf(stdout, "weights %s\nformat: %s (exported weights: no optimizer state, step or checksum)\nkind: %s\n", path, w.Format, k)
	if w.TaskConfig != nil {
		fmt.Fprintf(stdout, "task config: %s\n", w.TaskConfig)
	}
	if w.Provenance.BLAS != "" {
		fmt.Fprintf(stdout, "exported by: %s\n", w.Provenance)
	}
	return printModel(stdout, w.Config, w.Params)
}

// printModel prints the configuration and the parameters, by name, with
// their shapes.
func printModel(stdout io.Writer, config trainer.Config, params map[string]trainer.Tensor) error {
	cfg, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "config: %s\n", cfg)
	names := make([]string, 0, len(params))
	total := 0
	for n, t := range params {
		names = append(names, n)
		total += len(t.Data)
	}
	sort.Strings(names)
	fmt.Fprintf(stdout, "parameters: %d in %d tensors\n", total, len(names))
	for _, n := range names {
		fmt.Fprintf(stdout, "  %-24s %v\n", n, params[n].Shape)
	}
	return nil
}
