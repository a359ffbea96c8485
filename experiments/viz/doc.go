// Package viz draws the figures of the notebooks: heat maps of bias and
// index matrices, line plots of curves (LogLogGrid: log-log small multiples,
// for costs that grow as a power of the length), graphs as node-link diagrams
// (DrawGraph, laid out by Layout, nodes coloured by a value such as a
// learned distance bias), rendered to PNG bytes with
// gonum.org/v1/plot (notebooks show them inline with GoNB's
// gonbui.DisplayPNG; commands write them to files).
//
// It also evaluates what an encoding contributes to attention through the
// encoding's own graph nodes, so a figure shows exactly what a model adds:
// ScoreBias and BiasByDistance run an encoding's posenc.ScoreBiaser hook
// (T5, ALiBi, Shaw's scalar bias) on a fresh or trained parameter store,
// QKScores runs a posenc.QKTransformer (RoPE and its scalings) on constant
// query and key vectors. Relative distances follow posenc's convention:
// rel = key position - query position.
//
// Matrices are drawn with row 0 at the top, as attention matrices are
// printed; NaN entries (e.g. keys hidden by a causal mask, see
// Matrix.MaskCausal) are drawn light grey. A value range with both signs is
// drawn with a diverging blue-white-red map centred on zero, a one-signed
// range with a sequential map.
package viz
