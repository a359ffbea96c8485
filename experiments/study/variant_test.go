package study

import (
	"strings"
	"testing"
)

func TestParseVariant(t *testing.T) {
	for _, c := range []struct {
		spec, label, base, overrides string
		err                          []string // substrings of the error; nil: valid
	}{
		{spec: "t5", label: "t5", base: "t5"},
		{spec: "t5@t5-max-distance=64", label: "t5@t5-max-distance=64", base: "t5", overrides: "t5-max-distance=64"},
		{spec: "sinusoidal@sinusoidal-scale=1.0", label: "sinusoidal@sinusoidal-scale=1", base: "sinusoidal", overrides: "sinusoidal-scale=1"},
		{spec: "rope@rope-pairing=interleaved@rope-base=500", label: "rope@rope-pairing=interleaved@rope-base=500", base: "rope",
			overrides: "rope-pairing=interleaved@rope-base=500"},
		{spec: "t5@alpha=true", label: "t5@alpha=true", base: "t5", overrides: "alpha=true"},
		{spec: "", err: []string{"no encoding name"}},
		{spec: "@t5-max-distance=64", err: []string{"no encoding name"}},
		{spec: "t5@", err: []string{`override ""`, "key=value"}},
		{spec: "t5@t5-max-distance", err: []string{"t5-max-distance", "key=value"}},
		{spec: "t5@t5-max-distanse=64", err: []string{`"t5-max-distanse"`, "valid:", "t5-max-distance", "deberta-max-position"}},
		{spec: "t5@t5-max-distance=sixty", err: []string{"t5-max-distance", `"sixty"`, "integer"}},
		{spec: "t5@t5-max-distance=64@t5-max-distance=32", err: []string{"given twice"}},
		{spec: "t5@seed=3", err: []string{`"seed"`, "cannot be overridden"}},
		{spec: "t5@pos=alibi", err: []string{`"pos"`, "cannot be overridden"}},
		{spec: "t5@seq-len=128", err: []string{`"seq-len"`, "cannot be overridden"}},
		{spec: "rope@rope-pairing=a/b", err: []string{`"a/b"`, "letters, digits"}},
	} {
		v, err := ParseVariant(c.spec)
		if c.err != nil {
			wantErr(t, err, c.err...)
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.spec, err)
			continue
		}
		if v.Label() != c.label || v.Base != c.base || v.OverridesString() != c.overrides {
			t.Errorf("%q: label %q base %q overrides %q, want %q %q %q", c.spec, v.Label(), v.Base, v.OverridesString(),
				c.label, c.base, c.overrides)
		}
		if strings.Trim(v.Label(), "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@=._+-") != "" {
			t.Errorf("%q: label %q is not a safe file name", c.spec, v.Label())
		}
	}
}

func wantErr(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not contain %q", err, s)
		}
	}
}
