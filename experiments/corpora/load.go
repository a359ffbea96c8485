package corpora

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/rpe-go/rpe/experiments/trainer"
)

// Source describes a loaded corpus.
type Source struct {
	// Name is the name it was loaded by ("opticks", "kjv") or its path.
	Name string
	// Desc says what it is and how it was split, for tables.
	Desc string
	// Bytes and SHA256 describe the source as read (the file, or the
	// output of bible-kjv).
	Bytes  int
	SHA256 string
}

// Names are the corpora Load knows by name (any other value is a path).
var Names = []string{"opticks", "kjv"}

// Load returns the corpus named spec (see the package doc: "", "opticks",
// "kjv", or a text file's path) with its source. The corpus's Path is the
// spec for a named corpus ("kjv"), the file's path otherwise. Errors: as
// trainer.LoadCorpus for a file, as LoadBible for "kjv".
func Load(spec string) (*trainer.Corpus, Source, error) {
	switch spec {
	case "kjv":
		b, err := LoadBible()
		if err != nil {
			return nil, Source{}, err
		}
		train, val := b.Split()
		return &trainer.Corpus{Path: "kjv", Train: train, Val: val}, b.Source, nil
	case "opticks":
		spec = ""
	}
	c, err := trainer.LoadCorpus(spec)
	if err != nil {
		return nil, Source{}, err
	}
	raw := append(append([]byte(nil), c.Train...), c.Val...) // the file as read: NewCorpus splits it in two
	sum := sha256.Sum256(raw)
	name := c.Path
	if spec == "" {
		name = "opticks"
	}
	return c, Source{Name: name, Desc: fmt.Sprintf("%s (%d bytes, split 9:1 by position)", c.Path, len(raw)),
		Bytes: len(raw), SHA256: hex.EncodeToString(sum[:])}, nil
}

// Open is Load without the source: the corpus named spec.
func Open(spec string) (*trainer.Corpus, error) {
	c, _, err := Load(spec)
	return c, err
}

// FlagHelp describes the values of a -corpus flag.
const FlagHelp = `text corpus: "opticks" (Newton's Opticks from GOROOT, split 9:1), "kjv" (the King James Bible of Debian's bible-kjv, split by book; scripts/install-data.sh installs it) or a text file's path (split 9:1)`
