// Package fields names the leaf fields of configuration structs in one
// kebab-case scheme and sets them from strings, so that command-line flags,
// study variants ("t5@t5-max-distance=64") and config files all reach every
// option the same way, and a new option field is reachable with no new code.
//
// The name of a field is its Go name in kebab case (DModel -> d-model,
// T5MaxDistance -> t5-max-distance, FFN -> ffn). Nested structs are walked
// and flattened: their fields are named without a prefix. A struct tag
// `opt:"name"` renames a field (to resolve a clash between nesting levels),
// `opt:"-"` hides it. Walk reports a clash between two names as an error, so a
// clash is caught by the first test that walks the struct.
//
// Supported leaf kinds: bool, int*, uint*, float*, string. Fields of other
// kinds (and unexported fields) are skipped unless a struct, which is walked.
package fields

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/pkg/errors"
)

// Field is one settable leaf of a struct.
type Field struct {
	// Name is the kebab-case name ("t5-max-distance").
	Name string
	// Path is the Go field path ("Model.PosOpts.T5MaxDistance").
	Path string
	// Value is the addressable field.
	Value reflect.Value
}

// String returns the field's value as Set would accept it.
func (f Field) String() string { return format(f.Value) }

// Set parses s into the field. The error names the field and the kind it
// wants.
func (f Field) Set(s string) error {
	v := f.Value
	switch v.Kind() {
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return errors.Errorf("%s: %q is not a boolean (true or false)", f.Name, s)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return errors.Errorf("%s: %q is not an integer of %d bits", f.Name, s, v.Type().Bits())
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, v.Type().Bits())
		if err != nil {
			return errors.Errorf("%s: %q is not a non-negative integer of %d bits", f.Name, s, v.Type().Bits())
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		x, err := strconv.ParseFloat(s, v.Type().Bits())
		if err != nil {
			return errors.Errorf("%s: %q is not a number", f.Name, s)
		}
		v.SetFloat(x)
	case reflect.String:
		v.SetString(s)
	default:
		return errors.Errorf("%s: fields of kind %v cannot be set from text", f.Name, v.Kind())
	}
	return nil
}

// IsBool reports whether the field is a boolean (a flag without a value).
func (f Field) IsBool() bool { return f.Value.Kind() == reflect.Bool }

func format(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, v.Type().Bits())
	}
	return fmt.Sprint(v.Interface())
}

func settable(k reflect.Kind) bool {
	switch k {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// Walk returns the settable leaves of the struct ptr points to, in
// declaration order (depth first). It returns an error if ptr is not a
// non-nil pointer to a struct or if two leaves get the same name.
func Walk(ptr any) ([]Field, error) {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil, errors.Errorf("fields: want a non-nil pointer to a struct, got %T", ptr)
	}
	var out []Field
	walk(v.Elem(), "", &out)
	seen := map[string]string{}
	for _, f := range out {
		if p, ok := seen[f.Name]; ok {
			return nil, errors.Errorf("fields: %s and %s are both named %q (rename one with an `opt` tag)", p, f.Path, f.Name)
		}
		seen[f.Name] = f.Path
	}
	return out, nil
}

func walk(v reflect.Value, path string, out *[]Field) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("opt")
		if tag == "-" {
			continue
		}
		p := sf.Name
		if path != "" {
			p = path + "." + sf.Name
		}
		fv := v.Field(i)
		if sf.Type.Kind() == reflect.Struct && tag == "" {
			walk(fv, p, out)
			continue
		}
		if !settable(sf.Type.Kind()) {
			continue
		}
		name := tag
		if name == "" {
			name = Kebab(sf.Name)
		}
		*out = append(*out, Field{Name: name, Path: p, Value: fv})
	}
}

// Lookup returns the field of ptr called name. An unknown name is an error
// that lists the valid names.
func Lookup(ptr any, name string) (Field, error) {
	fs, err := Walk(ptr)
	if err != nil {
		return Field{}, err
	}
	for _, f := range fs {
		if f.Name == name {
			return f, nil
		}
	}
	return Field{}, errors.Errorf("unknown option %q (valid: %s)", name, strings.Join(Names(fs), ", "))
}

// Set sets the field of ptr called name from s (see Field.Set and Lookup).
func Set(ptr any, name, s string) error {
	f, err := Lookup(ptr, name)
	if err != nil {
		return err
	}
	return f.Set(s)
}

// Names returns the names of fs, sorted.
func Names(fs []Field) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	sort.Strings(out)
	return out
}

// Kebab converts a Go identifier to kebab case: DModel -> d-model,
// T5MaxDistance -> t5-max-distance, FFN -> ffn, YarnBetaFast ->
// yarn-beta-fast, EvalEvery -> eval-every, LR -> lr.
func Kebab(s string) string {
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 {
			prevLower := unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1])
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if prevLower || (unicode.IsUpper(r[i-1]) && nextLower) {
				b.WriteByte('-')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}
