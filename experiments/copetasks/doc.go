// Package copetasks generates the tasks on which Golovneva, Wang, Weston
// and Sukhbaatar 2024 ("Contextual Position Encoding: Learning to Count
// What's Important", arXiv 2405.18719) claim that CoPE, whose positions
// count the keys its gates select, succeeds where positions that count
// tokens fail: selective copy and counting (the paper's third, Flip-Flop,
// is not here). Each is a causal language-modelling task over a small
// vocabulary, scored only on its answer tokens, and Task trains it with
// the project's one engine (trainer.RunTask, kind "cope-tasks"). The study
// is experiments/copestudy, its command experiments/cope.
//
// # Selective copy
//
// The task of Gu and Dao's Mamba paper, as CoPE's paper uses it: a context
// of data tokens among blanks, then a separator, then the data tokens
// again, in order and without the blanks ("d m _ _ c _ m |" -> "d m c m",
// "_" the blank). Generate draws the n data tokens (CopyOptions.Data) uniformly
// from V (CopyOptions.Tokens; the paper: 16) and their n positions among
// the context's uniformly, the other positions holding blanks:
//
//	context (n data tokens + blanks) | answer (the n data tokens)
//
// The paper's splits, as a benchmark listing gives them (the paper's own
// table was not at hand): 128 data tokens among 128 blanks in training,
// among 64 (dense) and 256 blanks (sparse) at test; the study scales that
// down (16 among 16 in training; 8 and 48 at test, copestudy.DefaultTasks). The number of
// blanks is fixed per condition (the paper's splits are named by it), so
// every sequence of a condition has one length, and a batch needs no
// padding. To copy the k-th answer token a model must find the k-th data
// token of the context: the k-th among the non-blank tokens, at a token
// offset that depends on the blanks.
//
// # Counting
//
// The paper describes the task in words; the authors' generator
// (facebookresearch/RAM, projects/cope/scripts/count_data_gen.py) defines
// it: programs of statements "x = 0 ;" (assignment), "x ++;" (increment)
// and "pass;" (no-op) over variables a, b, c, ... drawn with weights 1, 7
// and 50, increments only of assigned variables and never past 10, then
// the question "print x" for an assigned x, and the answer x's value (the
// increments of x since its last assignment). The tokens are theirs, the
// words of the program: "x", "=", "0", ";", "++;", "pass;", "print" and
// the values 0..10 (the "0" of an assignment is the answer token 0).
//
// Where this package differs, and why:
//
//   - The authors draw 3 to 512 statements, so their sequences have every
//     length; here every context has exactly Context tokens, so a
//     condition's sequences share one length T = Context + 3 and batch
//     without padding. Ops statements (CountOptions.Ops) are assignments or
//     increments, drawn in order with the authors' relative weights 1 and 7
//     (the first is always an assignment: the authors' generator rejects an
//     increment before any assignment); the remaining context tokens are
//     passes, interleaved with the statements uniformly at random. A
//     context must hold at least 4 tokens per statement (CheckContext: all
//     could be assignments), so no draw is rejected for length.
//   - The passes' share is thus set by the context length rather than by
//     the weight 50; the study's training contexts are denser in
//     statements than the authors' (8 statements in 32 tokens).
//   - The paper tests generalisation to contexts unlike training; which
//     ones, for counting, we could not establish from the sources at hand.
//     Here a longer condition keeps the program's statements (Ops) and adds
//     passes: the same answers (in distribution) among more no-ops, the
//     counting analogue of selective copy's sparse split.
//
// # Layout and scoring
//
// An Example is the sequence's tokens and the index where its answer
// starts. Layout gives the model's input (BOS, then the tokens but the
// last: position i predicts token i) and targets: the tokens at the answer
// positions, -1 elsewhere, which graph.CrossEntropy ignores. The training
// loss is thus the mean cross-entropy over the answer tokens only (the
// authors' --train-on answer), and Evaluate scores only them,
// teacher-forced: the accuracy over answer tokens (argmax), the exact
// answers (every answer token of a sequence right; for counting the same
// as the accuracy), the bits per answer token, and the accuracy of always
// giving the most frequent answer token (a baseline that reads nothing).
//
// # Determinism
//
// Sequences are functions of the seed: training batch k of a model seeded
// with s is drawn from a generator seeded with (s, k) (Task.Batch), so a
// resumed run draws the batches of an uninterrupted one; validation and
// test sequence i from Stream(seed, i) (Set), the same whatever the other
// sequences are. Generate draws a sequence's content (data tokens;
// statements and question) before its blanks or passes, so sequence i of
// a test set with longer contexts holds the content and answer of
// sequence i of the set at the training length, among more blanks or
// passes: the conditions differ in the distances alone. Checkpoints record the options, the training context and
// the validation sequences (TaskConfig); a checkpoint of others is
// refused.
package copetasks
