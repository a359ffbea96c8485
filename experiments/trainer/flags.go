package trainer

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/pkg/errors"

	"github.com/rpe-go/rpe/internal/fields"
	"github.com/rpe-go/rpe/posenc"
)

// FlagAliases maps the short flag names kept from earlier versions of the
// commands to option names.
var FlagAliases = map[string]string{"seq": "seq-len", "d": "d-model"}

// flagHelp is the help text of the options of Config and layers.Config: a
// sentence with the unit. The position-encoding options take theirs from
// posenc.OptionDocs; TestFlagHelp checks that every option has one.
var flagHelp = map[string]string{
	"vocab": "vocabulary size, in symbols (must be 256: bytes)", "d-model": "model width d, in dimensions",
	"heads": "attention heads H (d-model must be a multiple of H)", "layers": "number of Transformer blocks",
	"ffn": "hidden width of the feed-forward layers, in dimensions", "eps": "epsilon of the LayerNorms",
	"init-std": "standard deviation of the N(0, std²) init of weights and embeddings",
	"causal":   "mask the keys after each query (causal language modelling)",
	"stream":   "compute attention in tiles of keys without the [B, H, T, T] scores: O(T) memory, for the encodings that stream",
	"batch":    "windows per update", "seq-len": "training window length L, in bytes", "steps": "optimizer updates of the whole run",
	"lr": "peak learning rate of AdamW", "beta1": "AdamW's first-moment decay β1", "beta2": "AdamW's second-moment decay β2",
	"adam-eps":     "AdamW's denominator epsilon",
	"weight-decay": "decoupled weight decay of matrices and embeddings, per update and unit of learning rate",
	"warmup":       "linear warm-up of the learning rate, in updates",
	"floor-frac":   "final learning rate of the cosine schedule, as a fraction of -lr",
	"clip-norm":    "largest global gradient norm; larger gradients are scaled down (0: no clipping)",
	"seed":         "seed of the initial weights and the batches",
	"eval-every":   "evaluate the validation split every N updates (0: only at the end)",
	"eval-batch":   "evaluation windows per forward pass", "dtype": "arithmetic: float32 or float64",
	"vit-pool": "ViT only: pool the patches' final states by their mean, or classify from a class token prepended to them: mean or cls", "vit-cls-pos": "ViT only, with -vit-pool cls: whether the position encoding covers the class token (timm's no_embed_class=False): with or without",
}

// ConfigFlags binds every option of a Config to a flag.FlagSet: one flag
// per leaf field, named by fields.Walk in kebab case (-lr, -seq-len,
// -d-model, -t5-max-distance, ...), plus -dtype, the FlagAliases, -config
// (a JSON configuration to start from) and -dump-config. A field added to
// Config, layers.Config or posenc.Options gets a flag with no new code.
type ConfigFlags struct {
	fs     *flag.FlagSet
	cfg    *Config
	kinds  []posenc.PosKind  // the positions the command's models take (nil: any)
	names  []string          // option names in declaration order
	paths  map[string]string // option -> Go field path
	set    []string          // "name=value" of explicit flags, in order
	file   string
	dump   bool
	dtype  string
	loaded map[string]bool // options the -config file sets
	differ map[string]bool // options the -config file sets to another value than the command's default
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

// Encodings returns the encodings that serve at least one of kinds (every
// registered encoding for none), in posenc.Registered's order: the values
// -pos takes on a command whose models take those positions.
func Encodings(kinds ...posenc.PosKind) []string {
	var out []string
	for _, i := range posenc.Registered() {
		if len(kinds) == 0 || slices.ContainsFunc(kinds, func(k posenc.PosKind) bool { return slices.Contains(i.Positions, k) }) {
			out = append(out, i.Name)
		}
	}
	return out
}

// BindFlags registers the flags of every option of cfg on fs (their
// defaults are cfg's values) and returns the binding; after fs.Parse, call
// Resolve to get the configuration. kinds are the positions the command's
// models take (posenc.PosLine for the language models): -pos lists only
// the encodings that serve them, and only the position-encoding options
// that one of those encodings reads (posenc.OptionsFor) get a flag (none
// given: every encoding and option). fs.Usage is set to print the flags
// grouped (model, position encoding, training, then the command's own).
func BindFlags(fs *flag.FlagSet, cfg *Config, kinds ...posenc.PosKind) *ConfigFlags {
	cf := &ConfigFlags{fs: fs, cfg: cfg, kinds: kinds, paths: map[string]string{}}
	fl, err := fields.Walk(cfg)
	if err != nil {
		panic(err) // a name clash in Config: caught by every test
	}
	applies := map[string]bool{}
	for _, o := range posenc.OptionsFor(Encodings(kinds...)) {
		applies[o] = true
	}
	for _, f := range fl {
		help := flagHelp[f.Name]
		if d, ok := posenc.OptionDocOf(f.Name); ok && strings.HasPrefix(f.Path, "Model.PosOpts.") {
			if !applies[f.Name] {
				continue // no encoding of this command reads it
			}
			help = d.Help
		}
		if f.Name == "pos" {
			help = "position encoding: " + strings.Join(Encodings(kinds...), ", ") + " (or several joined by +)"
		}
		if help == "" {
			help = "(undocumented: add it to trainer.flagHelp) " + f.Name
		}
		cf.names = append(cf.names, f.Name)
		cf.paths[f.Name] = f.Path
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
// file to another value than the command's default (after Resolve).
func (cf *ConfigFlags) Explicit(name string) bool {
	if cf.differ[name] {
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
// given. Errors name the file, the field or the flag. A value given is used
// or refused, never replaced: an explicit 0 of an option whose zero stands
// for its default (-t5-max-distance 0, -rope-base 0; posenc.CheckGiven) is
// refused, as are an empty -pos, an encoding that does not serve the
// command's positions, and an option outside its range
// (posenc.Options.Validate).
func (cf *ConfigFlags) Resolve() (Config, error) {
	c := *cf.cfg
	cf.loaded, cf.differ = map[string]bool{}, map[string]bool{}
	if cf.file != "" {
		b, err := os.ReadFile(cf.file)
		if err != nil {
			return c, errors.Wrap(err, "-config")
		}
		base := c
		if c, err = DecodeConfig(b, c); err != nil {
			return c, errors.WithMessagef(err, "-config %s", cf.file)
		}
		// Options the file sets count as explicit; those it sets to
		// another value than the default are checked against the
		// encodings (CheckApplies).
		present, err := jsonKeys(b)
		if err != nil {
			return c, errors.WithMessagef(err, "-config %s", cf.file)
		}
		_, a := base.optionValues()
		_, z := c.optionValues()
		for _, n := range cf.names {
			if present[strings.ToLower(cf.paths[n])] {
				cf.loaded[n] = true
				cf.differ[n] = a[n] != z[n]
			}
		}
		if err := c.Model.PosOpts.CheckGiven(c.Model.DModel, keys(cf.loaded)); err != nil {
			return c, errors.Errorf("-config %s: %v", cf.file, err)
		}
	}
	var given []string
	for _, s := range cf.set {
		name, val, _ := strings.Cut(s, "=")
		if err := fields.Set(&c, name, val); err != nil {
			return c, errors.WithMessage(err, "flag -"+name)
		}
		given = append(given, name)
	}
	if err := c.Model.PosOpts.CheckGiven(c.Model.DModel, given); err != nil {
		return c, errors.New("flag -" + err.Error())
	}
	if cf.flagSet("dtype") {
		dt, err := ParseDtype(cf.dtype)
		if err != nil {
			return c, errors.WithMessage(err, "flag -dtype")
		}
		c.Dtype = dt
	}
	if err := cf.checkPos(c.Model.Pos); err != nil {
		return c, err
	}
	if err := c.Model.PosOpts.Resolve(c.Model.DModel).Validate(); err != nil {
		return c, errors.New(strings.Replace(err.Error(), "posenc: option ", "flag -", 1))
	}
	*cf.cfg = c
	return c, nil
}

// checkPos refuses an empty -pos and encodings that do not serve the
// command's positions, listing those that do; pos may be a comma-separated
// list (bench).
func (cf *ConfigFlags) checkPos(pos string) error {
	valid := Encodings(cf.kinds...)
	list := strings.Join(valid, ", ")
	if cf.Explicit("pos") && strings.TrimSpace(pos) == "" {
		return errors.Errorf("flag -pos is empty: name an encoding (none for no position information; valid: %s)", list)
	}
	for _, p := range strings.Split(pos, ",") {
		if p == "" && !cf.Explicit("pos") {
			continue // unset: layers' "none"
		}
		info, ok := posenc.InfoOf(p)
		if !ok {
			if _, err := posenc.New(p, posenc.Options{}); err != nil && strings.Contains(p, posenc.CombineSep) && !strings.Contains(err.Error(), "unknown encoding") {
				return errors.Errorf("flag -pos %s: %v", p, strings.TrimPrefix(err.Error(), "posenc: "))
			}
			return errors.Errorf("flag -pos %q: unknown encoding (valid: %s, or several joined by %q)", p, list, posenc.CombineSep)
		}
		if len(cf.kinds) > 0 && !slices.ContainsFunc(cf.kinds, func(k posenc.PosKind) bool { return slices.Contains(info.Positions, k) }) {
			return errors.Errorf("flag -pos %s serves %v positions, not the %v positions of this command's models (valid: %s)", p, info.Positions, cf.kinds, list)
		}
	}
	return nil
}

// CheckApplies returns an error naming an option given explicitly (a flag,
// or a -config value other than the default) that none of encodings reads
// (posenc.OptionsOf): a value given must be used, so "-pos rope
// -t5-buckets 64" is refused instead of training rope as if the flag were
// not there. encodings are the models the command trains (train: -pos;
// a study: its plan's encodings).
func (cf *ConfigFlags) CheckApplies(encodings []string) error {
	read := map[string]bool{}
	for _, o := range posenc.OptionsFor(encodings) {
		read[o] = true
	}
	for _, n := range cf.names {
		if !strings.HasPrefix(cf.paths[n], "Model.PosOpts.") || read[n] {
			continue
		}
		if cf.given(n) || cf.differ[n] {
			var by []string
			for _, e := range posenc.Names() {
				if slices.Contains(posenc.OptionsOf(e), n) {
					by = append(by, e)
				}
			}
			return errors.Errorf("flag -%s is read by %s, not by %s: leave it out or train an encoding that reads it",
				n, strings.Join(by, ", "), strings.Join(encodings, ", "))
		}
	}
	return nil
}

// given reports whether option name was set by a flag.
func (cf *ConfigFlags) given(name string) bool {
	for _, s := range cf.set {
		if strings.HasPrefix(s, name+"=") {
			return true
		}
	}
	return false
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// jsonKeys returns the dotted paths, lower case, of the leaves of a JSON
// object ("model.posopts.t5maxdistance"), as encoding/json matches field
// names without regard to case.
func jsonKeys(b []byte) (map[string]bool, error) {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, errors.Wrap(err, "config")
	}
	out := map[string]bool{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			p := strings.ToLower(k)
			if prefix != "" {
				p = prefix + "." + p
			}
			if sub, ok := v.(map[string]any); ok {
				walk(p, sub)
				continue
			}
			out[p] = true
		}
	}
	walk("", m)
	return out, nil
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
			if name == "sinusoidal-scale" {
				def = fmt.Sprintf(" (default 1/√d-model = %.4g at d-model %d)", res.SinusoidalScale, cf.cfg.Model.DModel)
			}
		}
	}
	fmt.Fprintf(w, "  -%-22s %s%s\n", name, f.Usage, def)
}
