// Package optim holds the optimisers, gradient clipping and learning-rate
// schedules used to train the models of this module. It works on tensors, not
// on Gorgonia graphs: a Param is a pair of tensors (value and gradient) that an
// optimiser updates in place, so every graph bound to the same value tensors
// (see graph.Params) sees the update.
//
// Why not Gorgonia's solvers (v0.9.18, read in solvers.go and measured):
//   - WithClip clamps every gradient element to [-c, c] (tensor.Clamp), which
//     changes the direction of the gradient; Transformer training clips the
//     global L2 norm over all parameters instead (ClipGradNorm), which only
//     rescales it;
//   - AdamSolver's L2 regularisation is coupled (added to the gradient, then
//     divided by the adaptive denominator), which is not the decoupled weight
//     decay of AdamW (Loshchilov & Hutter 2019), and no solver can exclude
//     biases, LayerNorm gains and position-encoding tables from decay;
//   - gorgonia.AdamW does not update the weights at all: it computes
//     tensor.Mul(w, decay) without UseUnsafe, so the decay and the update go
//     to a fresh tensor (measured: w unchanged after Step); its moment
//     recurrences also use 1−β^t where β belongs;
//   - the tape machine accumulates gradients across RunAll calls and Reset
//     does not zero them; only Gorgonia's own solvers zero them in Step.
//     Optimizer.Step here zeroes every gradient after the update too, and
//     ZeroGrad does it explicitly.
//
// Semantics reproduced. AdamW, SGD and ClipGradNorm follow PyTorch
// (torch.optim.AdamW, torch.optim.SGD, torch.nn.utils.clip_grad_norm_) so that
// hyperparameters from the literature transfer unchanged; the formulas are
// written out in each type's documentation. Results agree with PyTorch to
// rounding, not bit for bit: arithmetic is float64 whatever the parameter
// dtype, the optimiser moments are kept in float64, and a float32 parameter is
// rounded once per step (PyTorch rounds after every float32 operation, and
// computes m with lerp). float32 training is thus at least as accurate as
// with PyTorch's float32 optimisers.
//
// Checkpoints. Optimizer.State returns every piece of optimiser state as named
// float64 slices (suitable for a safetensors file next to the weights) and
// LoadState restores it, so that a resumed run continues bit for bit.
//
// Learning-rate schedules implement Schedule; the training loop calls
// opt.SetLR(sched.LR(step)) before each opt.Step.
//
// References:
//
//   - I. Loshchilov, F. Hutter. Decoupled Weight Decay Regularization. ICLR 2019.
//     arXiv:1711.05101.
//   - D. P. Kingma, J. Ba. Adam: A Method for Stochastic Optimization. ICLR 2015.
//     arXiv:1412.6980.
//   - I. Loshchilov, F. Hutter. SGDR: Stochastic Gradient Descent with Warm
//     Restarts. ICLR 2017. arXiv:1608.03983 (cosine annealing).
//   - R. Pascanu, T. Mikolov, Y. Bengio. On the difficulty of training recurrent
//     neural networks. ICML 2013 (gradient-norm clipping).
package optim
