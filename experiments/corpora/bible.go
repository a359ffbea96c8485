package corpora

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os/exec"
	"regexp"
	"time"

	"github.com/pkg/errors"
)

// BibleRange is the passage Load asks bible-kjv for: the whole Bible.
const BibleRange = "Gen1:1-Rev22:21"

// BibleBooks are the 66 books as bible-kjv 4.38 labels them, in order.
var BibleBooks = []string{"Ge", "Exo", "Lev", "Num", "Deu", "Josh", "Jdgs", "Ruth", "1Sm", "2Sm", "1Ki", "2Ki",
	"1Chr", "2Chr", "Ezra", "Neh", "Est", "Job", "Psa", "Prv", "Eccl", "SSol", "Isa", "Jer", "Lam", "Eze", "Dan",
	"Hos", "Joel", "Amos", "Obad", "Jonah", "Mic", "Nahum", "Hab", "Zep", "Hag", "Zec", "Mal", "Mat", "Mark",
	"Luke", "John", "Acts", "Rom", "1Cor", "2Cor", "Gal", "Eph", "Phi", "Col", "1Th", "2Th", "1Tim", "2Tim",
	"Titus", "Phmn", "Heb", "Jas", "1Pet", "2Pet", "1Jn", "2Jn", "3Jn", "Jude", "Rev"}

// Book is one book of a parsed Bible.
type Book struct {
	// Name is the label bible-kjv gives it ("Ge", "1Sm"), Number its place
	// in the text (1-based).
	Name   string
	Number int
	// Verses is the number of verses, Text the verses without their
	// labels, one per line ("\n" after each).
	Verses int
	Text   []byte
}

// Validation reports whether the book belongs to the validation split:
// every tenth book.
func (b Book) Validation() bool { return b.Number%10 == 0 }

var verseLine = regexp.MustCompile(`^([1-3]?[A-Z][A-Za-z]*)([0-9]+):([0-9]+) (.*)$`)

// ParseBible parses the output of `bible -f RANGE`: one verse per line,
// "Book" "chapter:verse" then a space and the text ("Ge1:1 In the
// beginning ..."). Books are numbered in order of first appearance.
// Errors name the line: a line that is not a verse, a book that comes back
// after another, an empty text.
func ParseBible(raw []byte) ([]Book, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("bible: no verses")
	}
	var books []Book
	seen := map[string]bool{}
	for i, line := range bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n")) {
		m := verseLine.FindSubmatch(line)
		if m == nil {
			return nil, errors.Errorf("bible: line %d is not a verse (want \"Book1:1 text\"): %.60q", i+1, line)
		}
		name := string(m[1])
		if len(books) == 0 || books[len(books)-1].Name != name {
			if seen[name] {
				return nil, errors.Errorf("bible: line %d: book %s again after %s", i+1, name, books[len(books)-1].Name)
			}
			seen[name] = true
			books = append(books, Book{Name: name, Number: len(books) + 1})
		}
		b := &books[len(books)-1]
		b.Verses++
		b.Text = append(append(b.Text, m[4]...), '\n')
	}
	return books, nil
}

// Bible is the King James Bible as Load read it.
type Bible struct {
	Books []Book
	// Source describes where it came from, with the SHA-256 of the raw
	// output of bible-kjv.
	Source Source
}

// Split joins the books into the training text (the books whose Number is
// not a multiple of 10) and the validation text (those whose Number is),
// each book followed by a blank line.
func (b *Bible) Split() (train, val []byte) {
	for _, bk := range b.Books {
		if bk.Validation() {
			val = append(append(val, bk.Text...), '\n')
		} else {
			train = append(append(train, bk.Text...), '\n')
		}
	}
	return train, val
}

// bibleCommand is the program Load runs (a variable for tests).
var bibleCommand = "bible"

// installHint is what a missing data package's error tells the user.
const installHint = "run scripts/install-data.sh (as root, or with sudo), or apt-get install"

// LoadBible runs `bible -f Gen1:1-Rev22:21` (Debian's bible-kjv) and parses
// its output. Errors: bible-kjv is not installed (naming the package and
// the command that installs it), the command fails or times out (1 minute),
// the output is not the 66 books of BibleBooks in order.
func LoadBible() (*Bible, error) {
	path, err := exec.LookPath(bibleCommand)
	if err != nil {
		return nil, errors.Errorf("corpus kjv: the King James Bible needs Debian's bible-kjv package (%q is not in PATH): %s bible-kjv", bibleCommand, installHint)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "-f", BibleRange)
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		return nil, errors.Errorf("corpus kjv: %s -f %s: %v: %s", path, BibleRange, err, bytes.TrimSpace(stderr.Bytes()))
	}
	books, err := ParseBible(raw)
	if err != nil {
		return nil, errors.WithMessagef(err, "corpus kjv: output of %s -f %s", path, BibleRange)
	}
	if err := checkBooks(books); err != nil {
		return nil, errors.WithMessagef(err, "corpus kjv: output of %s -f %s", path, BibleRange)
	}
	sum := sha256.Sum256(raw)
	return &Bible{Books: books, Source: Source{
		Name:   "kjv",
		Desc:   fmt.Sprintf("King James Bible (Debian bible-kjv, `bible -f %s`, %d bytes; verse labels stripped, split by book: every tenth book validation)", BibleRange, len(raw)),
		Bytes:  len(raw),
		SHA256: hex.EncodeToString(sum[:]),
	}}, nil
}

// checkBooks returns an error unless books are the 66 of BibleBooks, in
// order.
func checkBooks(books []Book) error {
	if len(books) != len(BibleBooks) {
		return errors.Errorf("%d books, want %d", len(books), len(BibleBooks))
	}
	for i, b := range books {
		if b.Name != BibleBooks[i] {
			return errors.Errorf("book %d is %s, want %s", i+1, b.Name, BibleBooks[i])
		}
	}
	return nil
}
