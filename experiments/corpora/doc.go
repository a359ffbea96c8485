// Package corpora finds and loads the text corpora of the studies, by name:
//
//   - "" or "opticks": Newton's Opticks from GOROOT (567 KB,
//     trainer.DefaultCorpusPath), split 9:1 by position (trainer.NewCorpus);
//   - "kjv": the King James Bible of Debian's bible-kjv package, printed by
//     `bible -f "Gen1:1-Rev22:21"` (4.4 MB, 66 books), split by book;
//   - any other value: a text file, split 9:1 as Opticks (a file named
//     like a corpus is read as ./kjv).
//
// The Bible's verse labels ("Ge1:1 ") are stripped: each verse is one line
// of text, and a blank line ends every book. Validation is every tenth book
// (2 Samuel, Proverbs, Amos, Matthew, Philippians, 1 Peter: 357,659 bytes,
// 8.6% of the text), training the other 60, so the validation text is
// unseen text of every genre of the book (history, wisdom, prophecy,
// gospel, epistles), not windows drawn from the training books.
//
// Load never downloads: a missing bible-kjv is refused with the command
// that installs it (scripts/install-data.sh). Every loaded corpus carries
// the SHA-256 of its source (Source.SHA256), which the studies record.
package corpora
