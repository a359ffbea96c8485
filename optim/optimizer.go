package optim

// Optimizer updates a set of parameters in place from their gradients.
type Optimizer interface {
	// Step applies one update with the current learning rate to every
	// parameter of ps, then sets every Grad to zero (Gorgonia accumulates
	// gradients across runs and never zeroes them). Step checks all of ps
	// before changing anything: on error no value, gradient or state has been
	// modified. Errors name the offending parameter: nil or non-contiguous
	// tensors, a dtype other than Float32/Float64, Value and Grad with
	// different shapes or dtypes, an empty or duplicated Name, state (after
	// LoadState) whose size does not match the parameter, and invalid
	// hyperparameters.
	Step(ps []Param) error
	// SetLR sets the learning rate used by the following Steps.
	SetLR(lr float64)
	// LR returns the current learning rate.
	LR() float64
	// State returns a deep copy of all optimiser state (learning rate, step
	// counts, moments, momentum buffers) as named float64 slices.
	State() map[string][]float64
	// LoadState replaces all optimiser state by st, as returned by State. It
	// returns an error, and leaves the optimiser unchanged, on an unknown key,
	// a missing or mismatched entry. The next Step also returns an error if
	// its parameter names differ from those held in st.
	LoadState(st map[string][]float64) error
}
