// Package clitest holds the project's corpus of bad command-line inputs: a
// table of invocations of every command (experiments/train, checkpoint,
// extrapolation, vision, graphs, code, times, stability and bench), each with
// the exit status it must give, the words its error must contain (the flag
// or file at fault), and the rule that a refused invocation writes or changes
// nothing on disk.
//
// The test builds the commands once (go build into a temporary directory),
// makes a small fixture (a text corpus, a tiny trained checkpoint, an
// exported weights file) in a temporary working directory, snapshots that
// directory (every file's path, size, mode, modification time and SHA-256),
// runs each row there, and compares the snapshot afterwards. A new probe is
// one row of badInputs.
//
// The package has no non-test code.
package clitest
