package trainer

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/internal/fields"
	"github.com/rpe-go/rpe/posenc"
)

// FlagAliases maps the short flag names kept from earlier versions of the
// commands to option names.
var FlagAliases = map[string]string{"seq": "seq-len", "d": "d-model"}

// flagHelp is the help text of the options (an option without one is
// described by its Go field path, so a new field still gets a flag).
var flagHelp = map[string]string{
	"vocab": "vocabulary size (must be 256: bytes)", "d-model": "model width d", "heads": "attention heads",
	"layers": "Transformer blocks", "ffn": "feed-forward width", "eps": "LayerNorm epsilon",
	"init-std": "std of the N(0, std²) init of weights and embeddings", "causal": "causal attention mask (language modelling)",
	"pos":     "position encoding: " + strings.Join(posenc.Names(), ", "),
	"max-len": "rows of the learned absolute table (train: seq-len unless given)", "pos-init-std": "init std of learnable position tables",
	"alpha": "learnable scale (init 0.1) on the scores' learnable position bias or terms", "sinusoidal-scale": "scale of the sinusoidal table (0: 1/sqrt(d-model))",
	"shaw-k": "Shaw clipping distance K", "xl-untie-r": "Transformer-XL: per-layer u and v (untie_r) instead of shared", "t5-buckets": "T5 buckets", "t5-max-distance": "where T5's log buckets end",
	"deberta-buckets": "DeBERTa bucket size", "deberta-max-position": "where DeBERTa's log buckets end",
	"rope-base": "RoPE base", "rope-pairing": "RoPE pairing: half or interleaved", "rope-fraction": "fraction of head dims RoPE rotates",
	"rope-scale": "RoPE context-extension factor (rope-pi, rope-ntk, rope-yarn)", "rope-train-len": "training length rope-dynamic and rope-yarn refer to",
	"yarn-beta-fast": "YaRN ramp bound (fast)", "yarn-beta-slow": "YaRN ramp bound (slow)",
	"batch": "windows per update", "seq-len": "training sequence length L", "steps": "optimizer updates of the whole run",
	"lr": "peak learning rate", "beta1": "AdamW beta1", "beta2": "AdamW beta2", "adam-eps": "AdamW epsilon",
	"weight-decay": "decoupled weight decay (matrices and embeddings)", "warmup": "linear warm-up updates",
	"floor-frac": "final learning rate as a fraction of lr (cosine floor)", "clip-norm": "global gradient-norm clip (0: none)",
	"seed": "seed of the initial weights and the batches", "eval-every": "evaluate every N updates (0: only at the end)",
	"eval-batch": "evaluation batch size", "dtype": "float32 or float64",
}

// ConfigFlags binds every option of a Config to a flag.FlagSet: one flag
// per leaf field, named by fields.Walk in kebab case (-lr, -seq-len,
// -d-model, -t5-max-distance, ...), plus -dtype, the FlagAliases, -config
// (a JSON configuration to start from) and -dump-config. A field added to
// Config, layers.Config or posenc.Options gets a flag with no new code.
type ConfigFlags struct {
	fs     *flag.FlagSet
	cfg    *Config
	names  []string          // option names in declaration order
	paths  map[string]string // option -> Go field path
	set    []string          // "name=value" of explicit flags, in order
	file   string
	dump   bool
	dtype  string
	loaded map[string]bool // options the -config file sets
}

// flagValue records an explicit option flag after checking its syntax.
type flagValue struct {
	cf   *ConfigFlags
	name string
	def  string
	bool bool
}

func (v *flagValue) String() string {
	if v == nil {
		return ""
	}
	return v.def
}
func (v *flagValue) IsBoolFlag() bool { return v.bool }
func (v *flagValue) Set(s string) error {
	var scratch Config
	if err := fields.Set(&scratch, v.name, s); err != nil {
		return err
	}
	v.cf.set = append(v.cf.set, v.name+"="+s)
	return nil
}

// BindFlags registers the flags of every option of cfg on fs (their
// defaults are cfg's values) and returns the binding; after fs.Parse, call
// Resolve to get the configuration. fs.Usage is set to print the flags
// grouped (model, position encoding, training, then the command's own).
func BindFlags(fs *flag.FlagSet, cfg *Config) *ConfigFlags {
	cf := &ConfigFlags{fs: fs, cfg: cfg, paths: map[string]string{}}
	fl, err := fields.Walk(cfg)
	if err != nil {
		panic(err) // a name clash in Config: caught by every test
	}
	for _, f := range fl {
		cf.names = append(cf.names, f.Name)
		cf.paths[f.Name] = f.Path
		help := flagHelp[f.Name]
		if help == "" {
			help = f.Path
		}
		fs.Var(&flagValue{cf: cf, name: f.Name, def: f.String(), bool: f.IsBool()}, f.Name, help)
	}
	for alias, name := range FlagAliases {
		fs.Var(&flagValue{cf: cf, name: name, def: fs.Lookup(name).DefValue}, alias, "alias of -"+name)
	}
	dt := "float32"
	if cfg.Dtype.Type != nil {
		dt = cfg.Dtype.String()
	}
	fs.StringVar(&cf.dtype, "dtype", dt, flagHelp["dtype"])
	fs.StringVar(&cf.file, "config", "", "JSON configuration to start from (as -dump-config prints it); flags given explicitly override it")
	fs.BoolVar(&cf.dump, "dump-config", false, "print the resolved configuration as JSON and exit")
	fs.Usage = func() { cf.PrintUsage(fs.Output()) }
	return cf
}

// Dump reports whether -dump-config was given.
func (cf *ConfigFlags) Dump() bool { return cf.dump }

// Explicit reports whether option name was set by a flag or by the -config
// file (after Resolve).
func (cf *ConfigFlags) Explicit(name string) bool {
	if cf.loaded[name] {
		return true
	}
	for _, s := range cf.set {
		if strings.HasPrefix(s, name+"=") {
			return true
		}
	}
	return name == "dtype" && cf.flagSet("dtype")
}

func (cf *ConfigFlags) flagSet(name string) bool {
	found := false
	cf.fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// Resolve returns the configuration: the defaults BindFlags was given,
// overridden by the -config file, overridden by the flags given explicitly
// (in command-line order). It also stores it in the Config BindFlags was
// given. Errors name the file, the field or the flag.
func (cf *ConfigFlags) Resolve() (Config, error) {
	c := *cf.cfg
	cf.loaded = map[string]bool{}
	if cf.file != "" {
		b, err := os.ReadFile(cf.file)
		if err != nil {
			return c, errors.Wrap(err, "-config")
		}
		base := c
		if c, err = DecodeConfig(b, c); err != nil {
			return c, errors.WithMessagef(err, "-config %s", cf.file)
		}
		// Options the file sets to a value other than the default count as
		// explicit.
		_, a := base.optionValues()
		_, z := c.optionValues()
		for k := range z {
			if a[k] != z[k] {
				cf.loaded[k] = true
			}
		}
	}
	for _, s := range cf.set {
		name, val, _ := strings.Cut(s, "=")
		if err := fields.Set(&c, name, val); err != nil {
			return c, errors.WithMessage(err, "flag -"+name)
		}
	}
	if cf.flagSet("dtype") {
		dt, err := ParseDtype(cf.dtype)
		if err != nil {
			return c, errors.WithMessage(err, "flag -dtype")
		}
		c.Dtype = dt
	}
	*cf.cfg = c
	return c, nil
}

// DumpJSON writes the resolved c as indented JSON (the -config format).
func DumpJSON(w io.Writer, c Config) error {
	b, err := json.MarshalIndent(c.Resolved(), "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// PrintUsage prints the flags grouped: model options, position-encoding
// options, training options, then the command's other flags.
func (cf *ConfigFlags) PrintUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage of %s:\n", cf.fs.Name())
	groups := []struct {
		title string
		match func(path string) bool
	}{
		{"Model (layers.Config)", func(p string) bool { return strings.HasPrefix(p, "Model.") && !strings.HasPrefix(p, "Model.PosOpts.") }},
		{"Position encoding (posenc.Options)", func(p string) bool { return strings.HasPrefix(p, "Model.PosOpts.") }},
		{"Training (trainer.Config)", func(p string) bool { return !strings.HasPrefix(p, "Model.") }},
	}
	mine := map[string]bool{"dtype": true, "config": true, "dump-config": true}
	for a := range FlagAliases {
		mine[a] = true
	}
	for _, g := range groups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, n := range cf.names {
			if g.match(cf.paths[n]) {
				mine[n] = true
				cf.printFlag(w, n)
			}
		}
		if strings.HasPrefix(g.title, "Training") {
			cf.printFlag(w, "dtype")
		}
	}
	fmt.Fprintf(w, "\nConfiguration:\n")
	cf.printFlag(w, "config")
	cf.printFlag(w, "dump-config")
	aliases := make([]string, 0, len(FlagAliases))
	for a, n := range FlagAliases {
		aliases = append(aliases, "-"+a+" = -"+n)
	}
	sort.Strings(aliases)
	fmt.Fprintf(w, "  aliases: %s\n", strings.Join(aliases, ", "))
	var rest []string
	cf.fs.VisitAll(func(f *flag.Flag) {
		if !mine[f.Name] {
			rest = append(rest, f.Name)
		}
	})
	if len(rest) > 0 {
		fmt.Fprintf(w, "\nRun:\n")
		for _, n := range rest {
			cf.printFlag(w, n)
		}
	}
}

func (cf *ConfigFlags) printFlag(w io.Writer, name string) {
	f := cf.fs.Lookup(name)
	if f == nil {
		return
	}
	def := ""
	if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
		def = fmt.Sprintf(" (default %s)", f.DefValue)
	} else if f.DefValue == "0" || f.DefValue == "" {
		// A zero position option stands for its default: show what it
		// resolves to at this configuration's width.
		res := cf.cfg.Model.PosOpts.Resolve(cf.cfg.Model.DModel)
		if fl, err := fields.Lookup(&res, name); err == nil && fl.String() != f.DefValue {
			def = fmt.Sprintf(" (default %s)", fl.String())
		}
	}
	fmt.Fprintf(w, "  -%-22s %s%s\n", name, f.Usage, def)
}
