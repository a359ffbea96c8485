// Package gocode is the host-side data of a byte-level causal language
// model on Go source with tree-relative positions (issue 14): Go files
// parsed into compact syntax trees, the innermost syntax node of every
// byte, the (up, down) relation of two bytes through their lowest common
// ancestor, and a window sampler that yields bytes, next-byte targets and
// relations in the layout of posenc.NewPairwise. It has no graph ops and
// no encodings.
//
// # Corpus
//
// LoadCorpus walks a directory of Go sources ($(go env GOROOT)/src by
// default, DefaultRoot), skipping the directories the go command ignores
// (testdata, vendor, names starting with "." or "_") and _test.go files
// (unless Options.Tests), and parses every file with go/parser
// (SkipObjectResolution; ParseComments if Options.Comments). A file that
// cannot be read or does not parse is skipped and counted
// (Corpus.Skipped, the first MaxSkipReports kept with their errors), never
// an error or a panic; a directory with no Go file, or none that loads, is
// an error. Files are split by package directory into train, validation and
// test by a hash of the directory path relative to the root (its import
// path for GOROOT/src; SplitOf), so no package spans two splits and a
// package keeps its split whatever else is loaded. Options.MaxBytes caps
// the bytes of each split in proportion to its fraction (packages taken in
// a second hash order), so tests and quick presets load only what they use;
// Options.Dirs restricts the walk to some sub-directories. Corpus.Hash
// identifies the loaded files and the options that change the relations,
// for checkpoint checks.
//
// # Trees and bytes
//
// A File holds its bytes Src [N], its Tree (Parent, Depth, Kind, one entry
// per node; node 0 is the *ast.File, nodes in ast.Inspect pre-order, so
// Parent[i] < i) and ByteNode [N], the innermost node containing each byte:
// the node with the shortest [Pos, End) range holding it. Bytes in no
// smaller node belong to the root, node 0: whitespace between top-level
// declarations, the package keyword, the trailing newline. Whitespace
// inside a declaration belongs to the innermost node around it (the blank
// between "return" and "}" to the BlockStmt). Punctuation belongs to the
// node whose range holds it ("(" and ")" to a FieldList, ";" between
// statements to the enclosing block). go/ast ranges do not always nest:
// a FuncDecl's FuncType runs from "func" through the results and so
// covers the receiver and the name, children of the FuncDecl; the shortest
// range rule gives those bytes to the receiver's FieldList and the name's
// Ident.
//
// Comments: without Options.Comments they are not in the tree and their
// bytes belong to the innermost node around them, like whitespace. With
// it, every comment is a Comment node under a CommentGroup: a doc or line
// comment group is the child of the node it documents (as go/ast walks it,
// so its range lies outside its parent's), and a free-floating group is a
// child of the innermost node holding it (these nodes are numbered after
// the pre-order ones).
//
// # Relations
//
// For bytes i and j with nodes a and b and lowest common ancestor c, the
// relation is (up, down) = (Depth[a]-Depth[c], Depth[b]-Depth[c]), each
// clipped to Options.MaxUp and MaxDown, with id up*(MaxDown+1)+down in
// [0, NumTreeRelations(MaxUp, MaxDown)) (RelationID, UpDown). Bytes of one
// node have relation 0 = (0, 0); a byte of an ancestor's node is (k, 0),
// of a descendant's (0, k). This is the tree relation of Zügner et al.
// 2021 ("Language-Agnostic Representation Learning of Source Code from
// Structure and Context", ICLR; their shortest-path and ancestor distances
// between AST nodes) in the form of Shiv & Quirk 2019 ("Novel positional
// encodings to enable tree-based transformers", NeurIPS: a node's position
// as the path of steps from the root), here for bytes through the nodes
// that hold them.
//
// Relations fills the [n, n] relation matrix of a window of n bytes
// (row = query byte, column = key byte). It finds the window's k distinct
// nodes and the LCA of two of them by a binary search on their root paths:
// O(k² log depth + n²) per window and no per-file index (an Euler tour with
// a sparse table over all of GOROOT/src would take gigabytes).
//
// # Windows
//
// Sampler draws batches for a causal LM from one split: B windows of L
// input bytes and their L next-byte targets, each window inside one file
// (windows never cross a file boundary and are never padded; files shorter
// than L+1 bytes are not drawn), uniformly over every (file, offset) with
// room, from a seeded PCG generator. Next fills ids and targets [B, L] and
// rel [B, L, L] for posenc.NewPairwise(B, L, L, NumRelations(), rel).
// State and SetState save and restore the generator with the batch shape,
// relation bounds and corpus hash; SetState refuses a corrupt state or one
// of another configuration with an error and leaves the sampler unchanged.
// Window fills one window at a given file and offset (for evaluation).
//
// # Errors
//
// Bad input (options, window bounds, slice lengths, malformed trees,
// corrupt states) gives an error naming the problem; no function panics on
// bad input.
package gocode
