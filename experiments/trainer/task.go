package trainer

import (
	"encoding/json"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"

	"github.com/rpe-go/rpe/graph"
)

// Task is a model plus its data: what the engine (RunTask, NewTaskTrainer)
// trains. The engine owns the parameter store, the optimizer, the schedule,
// clipping, the non-finite checks, checkpoints and the run loop; the task
// builds the graph, feeds it batches and scores the weights. A task serves
// one trainer: Build is called once, then Next before every update.
// NewLMTask is the byte-level language model.
type Task interface {
	// Kind names the task in logs and checkpoints ("lm" for the language
	// model). A checkpoint of another kind is refused on resume.
	Kind() string
	// Build creates the model's parameters in p (seeded by p) and the
	// training graph in g for one batch, and returns the scalar mean loss
	// (nats; a 0-d node or one of shape [1], in p's dtype) and the
	// learnable nodes (every parameter of p, each once). The engine adds
	// the gradients and the tape machine. An error stops NewTaskTrainer.
	Build(g *G.ExprGraph, p *graph.Params) (loss *G.Node, learn G.Nodes, err error)
	// Next draws the next training batch and binds it to the graph's
	// inputs (G.Let). The batches must depend only on the generator state
	// (State), so that a resumed run draws the batches of an uninterrupted
	// one.
	Next() error
	// Items is the number of items (tokens, images) in one training batch,
	// for throughput.
	Items() int
	// State and SetState save and restore the batch generator
	// (checkpointed); SetState returns an error for a state it cannot
	// read.
	State() ([]byte, error)
	SetState([]byte) error
	// Validate scores the weights p on the validation data, without
	// disturbing the training graph (build a separate forward graph on p).
	// An empty Name or a non-finite Value is an error of the engine.
	Validate(p *graph.Params) (Validation, error)
	// DataHash identifies the training data; a checkpoint of other data is
	// refused on resume ("" is not checked).
	DataHash() string
	// Describe is a one-line description of the model and data for the log
	// (called after Build).
	Describe() string
}

// Validation is a task's validation result: Name ("bits/byte",
// "accuracy"), Value, and Text (the full log line, printed at the end of a
// run). Higher/lower-is-better does not matter to the engine. A zero
// Validation (Name "") is "not measured".
//
// EvalResult holds the language model's details (bits per byte, windows,
// scored targets); it is zero for other tasks.
type Validation struct {
	Name  string
	Value float64
	Text  string
	EvalResult
}

// TaskConfigurer is an optional interface of a Task whose data or model has
// settings outside Config (image size, patch size, data set). TaskConfig is
// recorded in checkpoints as opaque bytes; on resume CheckTaskConfig
// receives the bytes of the checkpoint (nil if it recorded none) and
// returns an error naming what differs to refuse it.
type TaskConfigurer interface {
	TaskConfig() ([]byte, error)
	CheckTaskConfig(saved []byte) error
}

// Units names, in the progress bar and the log, the loss and the items of a
// task: Loss is the unit of the loss divided by ln 2 (default "bits"; the
// language model's "bits/byte"), Items the plural of an item (default
// "items"; "tokens"), ItemsShort its short form in the progress bar
// (default Items; "tok").
type Units struct{ Loss, Items, ItemsShort string }

// UnitNamer is an optional interface of a Task giving its Units.
type UnitNamer interface{ Units() Units }

// unitsOf returns the units of task, with the defaults filled in.
func unitsOf(task Task) Units {
	var u Units
	if n, ok := task.(UnitNamer); ok {
		u = n.Units()
	}
	if u.Loss == "" {
		u.Loss = "bits"
	}
	if u.Items == "" {
		u.Items = "items"
	}
	if u.ItemsShort == "" {
		u.ItemsShort = u.Items
	}
	return u
}

// KindInfo describes a checkpoint kind (Task.Kind): the model a checkpoint
// of that kind holds and the command that trains and evaluates it.
type KindInfo struct {
	// Kind is the Task.Kind ("lm", "vit", ...).
	Kind string
	// Model describes the model and the command or study that trains it.
	Model string
	// Command is the command that evaluates a checkpoint of the kind
	// ("go run ./experiments/vision").
	Command string
	// File reports whether Command evaluates a checkpoint file given to it
	// (only experiments/checkpoint, for "lm"); a study command evaluates
	// the models it trains under its output directory.
	File bool
	// Known is false for a kind no Task of this build has.
	Known bool
}

// kinds is every Task.Kind of the project's tasks (the language model of
// this package, the studies of experiments/visionstudy, graphstudy,
// timestudy, codestudy and copetasks) and what serves it.
var kinds = []KindInfo{
	{Kind: lmKind, Model: "a byte-level language model, trained by experiments/train or the extrapolation study",
		Command: "go run ./experiments/checkpoint eval|sample", File: true, Known: true},
	{Kind: "vit", Model: "a ViT image classifier of the vision study", Command: "go run ./experiments/vision", Known: true},
	{Kind: "graph", Model: "a graph Transformer of the graph study", Command: "go run ./experiments/graphs", Known: true},
	{Kind: "times", Model: "an event-sequence language model of the time study", Command: "go run ./experiments/times", Known: true},
	{Kind: "code", Model: "a byte-level language model on Go source of the code study", Command: "go run ./experiments/code", Known: true},
	{Kind: "cope-tasks", Model: "a language model of CoPE's selective copy and counting tasks (the CoPE study)", Command: "go run ./experiments/cope", Known: true},
}

// Kinds returns the KindInfo of every known checkpoint kind, "lm" first.
func Kinds() []KindInfo { return append([]KindInfo(nil), kinds...) }

// KindOf returns the KindInfo of kind ("" is "lm", as in a v1 or v2
// checkpoint). An unknown kind (a checkpoint of a newer build, or of a task
// outside the project) has Known false and no Command.
func KindOf(kind string) KindInfo {
	if kind == "" {
		kind = lmKind
	}
	for _, k := range kinds {
		if k.Kind == kind {
			return k
		}
	}
	return KindInfo{Kind: kind, Model: "a model of a task this build does not know"}
}

// String is "<kind> (<model>)".
func (k KindInfo) String() string { return k.Kind + " (" + k.Model + ")" }

// Serving says in a sentence what evaluates a checkpoint of the kind, for
// error messages (path names the file; "" is "FILE"): the command for
// "lm"; for a study's kind, that no command evaluates a single file but the
// study evaluates the models it trains; for an unknown kind, that no
// command of this build evaluates it. Each names `checkpoint info`, which
// shows a checkpoint of any kind, unless the command serves the file.
func (k KindInfo) Serving(path string) string {
	if path == "" {
		path = "FILE"
	}
	info := "go run ./experiments/checkpoint info -ckpt " + path + " shows it"
	switch {
	case k.File:
		return "evaluate it with " + k.Command + " -ckpt " + path
	case k.Known:
		return "no command evaluates a single " + k.Kind + " checkpoint file: " + k.Command +
			" trains and evaluates the models of its study (under its output directory); " + info
	}
	return "no command of this build evaluates it; " + info
}

// Kind is the checkpoint's Task.Kind ("lm" for a v1 or v2 file, which
// records none).
func (ck *Checkpoint) Kind() string { return ck.kind() }

// BatchCounter is the batch state of a task whose batches are a function of
// its seed and the batch index: Step counts the batches drawn so far.
// Embedded in a task, it is the task's State and SetState ({"step": n}).
type BatchCounter struct {
	Step uint64 `json:"step"`
}

// State implements Task: the batches drawn so far.
func (c *BatchCounter) State() ([]byte, error) { return json.Marshal(c) }

// SetState implements Task; a state that is not {"step": n} is an error.
func (c *BatchCounter) SetState(s []byte) error {
	var st BatchCounter
	if err := json.Unmarshal(s, &st); err != nil {
		return errors.Wrap(err, "corrupt batch state (want {\"step\": n})")
	}
	*c = st
	return nil
}
