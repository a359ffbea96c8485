// Package ftstudy is the fine-tuning study of issue #33: does a model
// trained at L adapt to a longer length L' in a few hundred updates, and
// which encoding adapts fastest? Position Interpolation (Chen et al. 2023,
// "Extending Context Window of Large Language Models via Positional
// Interpolation") reports that ~1,000 steps recover a longer window, YaRN
// (Peng et al. 2023) that fewer do, and the second source document advises
// ALiBi "when you need to adapt to other lengths quickly".
//
// Every model of a finished length study (extrapstudy, the bible preset:
// L = 512 on the King James Bible) is the start of one new run per entry
// (trainer.RunOptions.InitFrom: the source's weights, a fresh optimizer,
// the same batches for every entry of a seed) at L' = 2,048; a RoPE
// scaling starts from the rope model with rope-scale L'/L and
// rope-train-len L (trainer.InitConfig). The run keeps its checkpoints
// after 25 and 100 updates (trainer.RunOptions.KeepAt) and ends at 400; the
// source and each kept model are scored at 2,048, 4,096 and 8,192 on the
// same text. The result is a curve of bits per byte against fine-tuning
// updates per entry, with 95% t intervals over seeds, and paired
// comparisons of the entries at each length and number of updates (on the
// seeds, and on the seeds and evaluation windows).
//
// The study runs on the shared framework (study.Jobs): one job per entry
// and seed, listed entry-major, resumable, with CSV, JSON, Markdown and
// PNG outputs under runs/finetune/<preset>/; the command is
// experiments/finetune.
package ftstudy
