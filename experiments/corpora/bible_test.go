package corpora

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// sample is testdata/kjv/sample.txt: the first three verses of every book,
// in the format of `bible -f`.
func sample(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../../testdata/kjv/sample.txt")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseBibleSample(t *testing.T) {
	books, err := ParseBible(sample(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkBooks(books); err != nil {
		t.Fatal(err)
	}
	for _, b := range books {
		if b.Verses != 3 || bytes.Count(b.Text, []byte("\n")) != 3 {
			t.Errorf("%s: %d verses, %d lines, want 3", b.Name, b.Verses, bytes.Count(b.Text, []byte("\n")))
		}
	}
	if got, want := string(books[0].Text[:60]), "In the beginning God created the heaven and the earth.\nAnd t"; got != want {
		t.Errorf("Genesis starts %q, want %q (labels stripped)", got, want)
	}
	if books[65].Name != "Rev" || books[65].Number != 66 {
		t.Errorf("last book %s number %d", books[65].Name, books[65].Number)
	}
	bib := &Bible{Books: books}
	train, val := bib.Split()
	var names []string
	for _, b := range books {
		if b.Validation() {
			names = append(names, b.Name)
			if !bytes.Contains(val, b.Text) || bytes.Contains(train, b.Text) {
				t.Errorf("%s: validation book not (only) in the validation text", b.Name)
			}
		} else if !bytes.Contains(train, b.Text) || bytes.Contains(val, b.Text) {
			t.Errorf("%s: training book not (only) in the training text", b.Name)
		}
	}
	if got := strings.Join(names, ","); got != "2Sm,Prv,Amos,Mat,Phi,1Pet" {
		t.Errorf("validation books %s", got)
	}
	if bytes.Count(val, []byte("\n\n")) != 6 || bytes.Count(train, []byte("\n\n")) != 60 {
		t.Errorf("want a blank line after every book: %d in validation, %d in training", bytes.Count(val, []byte("\n\n")), bytes.Count(train, []byte("\n\n")))
	}
}

func TestParseBibleErrors(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{"", "no verses"},
		{"Ge1:1 In the beginning\nnot a verse\n", "line 2 is not a verse"},
		{"Ge1:1 a\nExo1:1 b\nGe1:2 c\n", "line 3: book Ge again after Exo"},
		{"Ge1:1 a\nGe1:2\n", "line 2 is not a verse"},
	} {
		_, err := ParseBible([]byte(c.raw))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.raw, err, c.want)
		}
	}
	books, err := ParseBible([]byte("Ge1:1 a\nExo1:1 b\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkBooks(books); err == nil || !strings.Contains(err.Error(), "2 books, want 66") {
		t.Errorf("two books: %v", err)
	}
	books, _ = ParseBible(sample(t))
	books[3].Name = "Numbers"
	if err := checkBooks(books); err == nil || !strings.Contains(err.Error(), "book 4 is Numbers, want Num") {
		t.Errorf("a renamed book: %v", err)
	}
}

// TestLoadBibleMissing: without bible-kjv the error names the package and
// the script that installs it.
func TestLoadBibleMissing(t *testing.T) {
	old := bibleCommand
	bibleCommand = "rpe-no-such-bible-command"
	defer func() { bibleCommand = old }()
	_, _, err := Load("kjv")
	for _, s := range []string{"bible-kjv", "scripts/install-data.sh", "apt-get install bible-kjv"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("error %v, want %q", err, s)
		}
	}
}

// TestLoadBible loads the installed Bible (skipped without bible-kjv):
// 66 books, 31,102 verses, the split's sizes.
func TestLoadBible(t *testing.T) {
	if _, err := exec.LookPath(bibleCommand); err != nil {
		t.Skip("bible-kjv is not installed (scripts/install-data.sh)")
	}
	c, src, err := Load("kjv")
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadBible()
	if err != nil {
		t.Fatal(err)
	}
	verses := 0
	for _, bk := range b.Books {
		verses += bk.Verses
	}
	if verses != 31102 || len(c.Val) != 357659 || len(c.Train)+len(c.Val) != 4137850+66 || src.Bytes != 4404412 || len(src.SHA256) != 64 {
		t.Errorf("%d verses, %d validation and %d training bytes, source %d bytes sha256 %s", verses, len(c.Val), len(c.Train), src.Bytes, src.SHA256)
	}
}

func TestLoadOpticks(t *testing.T) {
	c, src, err := Load("opticks")
	if err != nil {
		t.Fatal(err)
	}
	if src.Name != "opticks" || src.Bytes != len(c.Train)+len(c.Val) || len(src.SHA256) != 64 || c.Path == "" {
		t.Errorf("%+v (corpus path %q)", src, c.Path)
	}
	if _, _, err := Load("/no/such/corpus.txt"); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing file: %v", err)
	}
}
