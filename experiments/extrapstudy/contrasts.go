package extrapstudy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rpe-go/rpe/experiments/stats"
	"github.com/rpe-go/rpe/experiments/study"
)

// cond names the condition of rows at le under protocol pr in the
// contrasts' table: "512 (8L)" for every target, "512 (8L), last L" for
// the last L, "16384 (32L), chunks:512" for a long-text protocol.
func cond(le, L int, pr string) string {
	c := fmt.Sprintf("%d (%dL)", le, le/L)
	switch {
	case pr == ProtocolLast:
		c += ", last L"
	case pr != ProtocolAll:
		c += ", " + pr
	}
	return c
}

// contrast is one comparison of a reading: encoding a at factor fa against
// b at fb (factors of L), both under protocol pr ("" for every target).
type contrast struct {
	a     string
	fa    int
	b     string
	fb    int
	pr    string
	claim string
}

// readingContrasts are the comparisons that the reading of preset makes
// (docs/studies/extrapolation.md and, for the bible presets, the second
// document's claims), in the order the reading makes them.
func readingContrasts(preset string) []contrast {
	var cs []contrast
	add := func(claim, a string, fa int, b string, fb int) { cs = append(cs, contrast{a, fa, b, fb, "", claim}) }
	vsAt := func(claim, a, b string, fs ...int) {
		for _, f := range fs {
			add(claim, a, f, b, f)
		}
	}
	switch preset {
	case "full":
		add("ALiBi keeps its loss beyond L", "alibi", 8, "alibi", 1)
		cs = append(cs, contrast{"alibi", 8, "alibi", 1, ProtocolLast, "ALiBi keeps its loss beyond L, last L"})
		add("RoPE is worse than no positions at 8L", "rope", 8, "none", 8)
		add("sinusoidal is worse than no positions at 8L", "sinusoidal", 8, "none", 8)
		add("YaRN is the best RoPE scaling", "rope-yarn", 8, "rope-dynamic", 8)
		add("dynamic NTK beats NTK", "rope-dynamic", 8, "rope-ntk", 8)
		vsAt("interpolation without fine-tuning is worse than plain RoPE", "rope-pi", "rope", 2, 8)
		vsAt("Transformer-XL beats ALiBi", "xl", "alibi", 1, 8)
		vsAt("Shaw beats ALiBi", "shaw", "alibi", 1, 8)
		add("ALiBi trails even sinusoidal at L", "alibi", 1, "sinusoidal", 1)
		add("Transformer-XL stays flat", "xl", 8, "xl", 1)
		add("Shaw stays flat", "shaw", 8, "shaw", 1)
		add("DeBERTa with its maximum at L stays flat", "deberta@deberta-max-position=64", 8, "deberta@deberta-max-position=64", 1)
		add("T5 with its maximum at L still degrades", "t5@t5-max-distance=64", 8, "t5@t5-max-distance=64", 1)
		add("T5 with its maximum at L degrades less", "t5@t5-max-distance=64", 8, "t5", 8)
		add("the sinusoidal default scale is better at L", "sinusoidal@sinusoidal-scale=1", 1, "sinusoidal", 1)
		for _, e := range []string{"kerple-log", "kerple-power", "sandwich", "dpb"} {
			vsAt(e+" beats ALiBi", e, "alibi", 1, 8)
			add(e+" stays flat", e, 8, e, 1)
		}
		add("the dynamic bias ties Transformer-XL", "dpb", 8, "xl", 8)
		add("FIRE degrades", "fire", 8, "fire", 1)
		add("xPos degrades less than RoPE", "xpos", 8, "rope", 8)
		add("CoPE is as good as the best at L", "cope", 1, "shaw", 1)
		add("CoPE holds at 2L", "cope", 2, "cope", 1)
		add("CoPE degrades beyond 2L", "cope", 8, "cope", 1)
		add("Llama 3's scaling ties YaRN at 2L", "rope-llama3", 2, "rope-yarn", 2)
		add("Llama 3's scaling is second to YaRN at 8L", "rope-llama3", 8, "rope-yarn", 8)
		add("Llama 3's scaling beats dynamic NTK at 8L", "rope-llama3", 8, "rope-dynamic", 8)
	case "long":
		vsAt("the document's ALiBi against RoPE", "alibi", "rope", 1, 2, 4, 8)
		add("ALiBi keeps its loss beyond L", "alibi", 8, "alibi", 1)
		add("RoPE degrades", "rope", 8, "rope", 1)
		add("YaRN recovers RoPE, short of ALiBi", "rope-yarn", 8, "alibi", 8)
		add("Transformer-XL beats ALiBi at 8L", "xl", 8, "alibi", 8)
		add("T5 degrades", "t5", 8, "t5", 1)
	case "bible", "bible-large":
		vsAt("the document's ALiBi against RoPE", "alibi", "rope", 1, 2, 4)
		add("ALiBi keeps its loss to 16L", "alibi", 16, "alibi", 1)
		add("RoPE degrades", "rope", 16, "rope", 1)
		vsAt("YaRN against ALiBi", "rope-yarn", "alibi", 4, 16)
		vsAt("Transformer-XL against ALiBi", "xl", "alibi", 1, 16)
		if preset == "bible" {
			add("ALiBi keeps its loss to 32L", "alibi", 32, "alibi", 1)
			add("KERPLE against ALiBi at 32L", "kerple-log", 32, "alibi", 32)
			add("FIRE degrades", "fire", 32, "fire", 1)
			add("CoPE holds at 2L", "cope", 2, "cope", 1)
			add("no positions against ALiBi at 32L", "none", 32, "alibi", 32)
			for _, e := range BibleEncodings {
				for _, pr := range []string{"chunks:512", "stride:512:256", "memory:512:512", "sinks:512:4"} {
					cs = append(cs, contrast{e, 32, e, 32, pr, e + ": " + pr + " against the full context"})
				}
			}
		}
	}
	return cs
}

// contrastSection renders the reading's contrasts of p (none: ""), from
// every scored row (rows n/a or not run give "not available").
func contrastSection(rows []Row, p Plan) string {
	cs := readingContrasts(strings.TrimSuffix(p.Preset, "-custom"))
	if len(cs) == 0 {
		return ""
	}
	L := p.TrainLen()
	var t study.ScoreTable
	for _, r := range rows {
		if r.Status != StatusOK {
			continue
		}
		sc := study.Scores{Value: r.BitsPerByte}
		if len(r.WindowBits) == r.Windows && r.Tokens > 0 {
			w := float64(r.Windows) / float64(r.Tokens)
			for _, v := range r.WindowBits {
				sc.Items = append(sc.Items, float64(v)*w)
			}
		}
		t.Add(r.Encoding, cond(r.EvalLen, L, r.Protocol), r.Seed, sc)
	}
	var out []study.Contrast
	for _, c := range cs {
		if !slices.Contains(p.Factors, c.fa) || !slices.Contains(p.Factors, c.fb) {
			continue
		}
		a, b := c.a, c.b
		// A RoPE scaling at L is the rope model itself.
		if c.fa == 1 && slices.Contains(RopeScalings, a) {
			a = "rope"
		}
		if c.fb == 1 && slices.Contains(RopeScalings, b) {
			b = "rope"
		}
		pa, pb := c.pr, c.pr
		if pa == "" {
			pa, pb = ProtocolAll, ProtocolAll
		}
		if c.a == c.b && c.fa == c.fb { // a protocol against the full context
			pb = ProtocolAll
		}
		out = append(out, study.Contrast{A: a, CondA: cond(c.fa*L, L, pa), B: b, CondB: cond(c.fb*L, L, pb), Claim: c.claim})
	}
	return study.ContrastSection("Contrasts of the reading",
		"The comparisons that the study's reading makes (docs/studies/extrapolation.md), in bits per byte, every target unless the condition says otherwise.",
		out, &t, "bits/byte", "evaluation windows", "%.3f", stats.LowerIsBetter)
}
