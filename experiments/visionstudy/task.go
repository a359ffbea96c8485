package visionstudy

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/rpe-go/rpe/experiments/images"
	"github.com/rpe-go/rpe/experiments/trainer"
	"github.com/rpe-go/rpe/graph"
	"github.com/rpe-go/rpe/layers"
)

// Data is what a classifier is trained and validated on.
type Data struct {
	// Train is the training set, Val the images Validate scores (the study
	// uses the first images of the test set; see Plan.ValImages).
	Train, Val *images.Dataset
	// Patch is the side of a square patch in pixels.
	Patch int
	// Norm normalises pixels (the zero value: images.MNISTNorm).
	Norm images.Norm
}

// ViTConfig returns the classifier of a training configuration: the
// encoder is cfg.Model, with one channel, the data's patch size and
// classes.
func (d Data) ViTConfig(cfg trainer.Config) layers.ViTConfig {
	return layers.ViTConfig{Encoder: cfg.Model, Channels: 1, Patch: d.Patch, Classes: d.Train.Classes}
}

// Task trains a layers.ViT classifier with the project's one engine
// (trainer.RunTask): it implements trainer.Task. Its training graph takes
// a batch [B, T, P*P] of patch sequences and the labels [B] and returns
// the mean cross-entropy (nats).
type Task struct {
	cfg     trainer.Config
	vit     layers.ViTConfig
	data    Data
	batcher *images.Batcher

	x      []float32
	labels []int
	xN, yN *G.Node
	xT, yT *tensor.Dense
	rows   int
	cols   int
}

// NewTask checks cfg and data and returns the task: the patch size must
// divide the images (images.Grid), the model must be a valid bidirectional
// encoder, and the validation images must have the training images' size.
func NewTask(cfg trainer.Config, data Data) (*Task, error) {
	if data.Train == nil || data.Val == nil {
		return nil, errors.New("vision task: training and validation sets are required")
	}
	vit := data.ViTConfig(cfg)
	if err := vit.Validate(); err != nil {
		return nil, err
	}
	if data.Val.Rows != data.Train.Rows || data.Val.Cols != data.Train.Cols {
		return nil, errors.Errorf("vision task: validation images are %dx%d, training images %dx%d", data.Val.Rows, data.Val.Cols, data.Train.Rows, data.Train.Cols)
	}
	bt, err := images.NewBatcher(data.Train, images.BatcherOptions{Batch: cfg.Batch, Patch: data.Patch, Seed: uint64(cfg.Seed), Norm: data.Norm})
	if err != nil {
		return nil, err
	}
	t := &Task{cfg: cfg, vit: vit, data: data, batcher: bt}
	t.rows, t.cols = bt.Grid()
	return t, nil
}

// Kind implements trainer.Task.
func (t *Task) Kind() string { return "vit" }

// Items implements trainer.Task: images per update.
func (t *Task) Items() int { return t.cfg.Batch }

// Describe implements trainer.Task.
func (t *Task) Describe() string {
	return fmt.Sprintf("%s on %dx%d images (%dx%d patches), batch %d; data %s: %d training, %d validation images",
		t.vit, t.data.Train.Rows, t.data.Train.Cols, t.rows, t.cols, t.cfg.Batch, t.data.Train.Source, t.data.Train.N, t.data.Val.N)
}

// Build implements trainer.Task.
func (t *Task) Build(g *G.ExprGraph, p *graph.Params) (*G.Node, G.Nodes, error) {
	m, err := layers.NewViT(g, p, t.vit)
	if err != nil {
		return nil, nil, errors.WithMessage(err, "vision task: building the model")
	}
	b, tt, pd := t.cfg.Batch, t.rows*t.cols, t.vit.PatchDim()
	t.x, t.labels = make([]float32, b*tt*pd), make([]int, b)
	t.xT = tensor.New(tensor.WithShape(b, tt, pd), tensor.Of(t.cfg.Dtype))
	t.yT = tensor.New(tensor.WithShape(b), tensor.WithBacking(t.labels))
	t.xN = G.NewTensor(g, t.cfg.Dtype, 3, G.WithShape(b, tt, pd), G.WithName("vit_patches"), G.WithValue(t.xT))
	t.yN = G.NewVector(g, tensor.Int, G.WithShape(b), G.WithName("vit_labels"), G.WithValue(t.yT))
	logits, err := m.Fwd(t.xN, t.rows, t.cols) // [B, Classes]
	if err != nil {
		return nil, nil, err
	}
	loss, err := graph.CrossEntropy(logits, t.yN)
	if err != nil {
		return nil, nil, err
	}
	return loss, m.Learnables(), nil
}

// Next implements trainer.Task.
func (t *Task) Next() error {
	if err := t.batcher.Next(t.x, t.labels); err != nil {
		return err
	}
	graph.CopyFloat32s(t.xT, t.x)
	if err := G.Let(t.xN, t.xT); err != nil {
		return errors.Wrap(err, "vision task: binding patches")
	}
	return errors.Wrap(G.Let(t.yN, t.yT), "vision task: binding labels")
}

// State implements trainer.Task.
func (t *Task) State() ([]byte, error) { return t.batcher.State() }

// SetState implements trainer.Task.
func (t *Task) SetState(s []byte) error { return t.batcher.SetState(s) }

// DataHash implements trainer.Task: the training set's hash.
func (t *Task) DataHash() string { return t.data.Train.Hash() }

// taskConfig is what a checkpoint of this task must agree on besides the
// training configuration.
type taskConfig struct {
	Rows, Cols, Patch, Classes int
	Norm                       images.Norm
}

func (t *Task) taskConfig() taskConfig {
	n := t.data.Norm
	if n == (images.Norm{}) {
		n = images.MNISTNorm
	}
	return taskConfig{Rows: t.data.Train.Rows, Cols: t.data.Train.Cols, Patch: t.data.Patch, Classes: t.data.Train.Classes, Norm: n}
}

// TaskConfig implements trainer.TaskConfigurer.
func (t *Task) TaskConfig() ([]byte, error) { return json.Marshal(t.taskConfig()) }

// CheckTaskConfig implements trainer.TaskConfigurer: a checkpoint of other
// image sizes, patch size, classes or normalisation is refused.
func (t *Task) CheckTaskConfig(saved []byte) error {
	var s taskConfig
	if err := json.Unmarshal(saved, &s); err != nil {
		return errors.Wrap(err, "vision task: checkpoint task configuration")
	}
	if w := t.taskConfig(); s != w {
		return errors.Errorf("vision task: checkpoint was trained on %dx%d images in %d-pixel patches, %d classes, norm %+v; this run has %dx%d, %d, %d, %+v",
			s.Rows, s.Cols, s.Patch, s.Classes, s.Norm, w.Rows, w.Cols, w.Patch, w.Classes, w.Norm)
	}
	return nil
}

// Validate implements trainer.Task: the accuracy on the validation images.
func (t *Task) Validate(p *graph.Params) (trainer.Validation, error) {
	r, err := Accuracy(p, t.vit, t.data.Val, t.data.Norm, t.cfg.EvalBatch)
	if err != nil {
		return trainer.Validation{}, err
	}
	return trainer.Validation{Name: "accuracy", Value: r.Accuracy,
		Text: fmt.Sprintf("validation: accuracy %.4f (%d/%d images), loss %.4f nats", r.Accuracy, r.Correct, r.Images, r.Loss)}, nil
}

// EvalResult is the outcome of Accuracy.
type EvalResult struct {
	// Accuracy is Correct/Images; Loss the mean cross-entropy in nats.
	Accuracy, Loss  float64
	Correct, Images int
	// Hits[i] reports whether image i of the dataset was classified right.
	Hits []bool
	// Rows and Cols are the patch grid the model ran on.
	Rows, Cols int
}

// Accuracy classifies every image of ds with the weights p (a model of
// configuration vit) in batches of at most batch images, on the patch grid
// of ds's size: the grid may differ from the training grid. An encoding
// that cannot serve the grid returns its error when the graph is built.
func Accuracy(p *graph.Params, vit layers.ViTConfig, ds *images.Dataset, norm images.Norm, batch int) (EvalResult, error) {
	var r EvalResult
	rows, cols, err := images.Grid(ds, vit.Patch)
	if err != nil {
		return r, err
	}
	if norm == (images.Norm{}) {
		norm = images.MNISTNorm
	}
	r.Rows, r.Cols = rows, cols
	if batch <= 0 {
		return r, errors.Errorf("accuracy: batch %d must be positive", batch)
	}
	batch = min(batch, ds.N)
	tt, pd := rows*cols, vit.PatchDim()
	// One graph per batch size: the full batches, then the remainder.
	run := func(from, n int) error {
		g := G.NewGraph()
		defer p.Forget(g)
		m, err := layers.NewViT(g, p, vit)
		if err != nil {
			return err
		}
		dt := p.Dtype()
		xT := tensor.New(tensor.WithShape(n, tt, pd), tensor.Of(dt))
		xN := G.NewTensor(g, dt, 3, G.WithShape(n, tt, pd), G.WithName("vit_patches"), G.WithValue(xT))
		logits, err := m.Fwd(xN, rows, cols) // [n, Classes]
		if err != nil {
			return err
		}
		vm := G.NewTapeMachine(g)
		defer vm.Close()
		x := make([]float32, n*tt*pd)
		idx := make([]int, n)
		for start := from; start+n <= ds.N && (n == batch || start == from); start += n {
			for i := range idx {
				idx[i] = start + i
			}
			if _, _, err := images.PatchBatch(ds, idx, vit.Patch, x); err != nil {
				return err
			}
			norm.Apply(x)
			graph.CopyFloat32s(xT, x)
			if err := G.Let(xN, xT); err != nil {
				return err
			}
			if err := vm.RunAll(); err != nil {
				return errors.Wrap(err, "accuracy")
			}
			out := graph.ToFloat64s(logits.Value())
			k := vit.Classes
			for i := 0; i < n; i++ {
				row := out[i*k : (i+1)*k]
				best, mx := 0, math.Inf(-1)
				for c, v := range row {
					if v > mx {
						best, mx = c, v
					}
				}
				lab := ds.Labels[start+i]
				if best == lab {
					r.Correct++
				}
				r.Hits = append(r.Hits, best == lab)
				lse := 0.0
				for _, v := range row {
					lse += math.Exp(v - mx)
				}
				r.Loss += mx + math.Log(lse) - row[lab]
				r.Images++
			}
			vm.Reset()
		}
		return nil
	}
	full := ds.N / batch * batch
	if full > 0 {
		if err := run(0, batch); err != nil {
			return r, err
		}
	}
	if rest := ds.N - full; rest > 0 {
		if err := run(full, rest); err != nil {
			return r, err
		}
	}
	if r.Images == 0 {
		return r, errors.New("accuracy: no images")
	}
	r.Accuracy = float64(r.Correct) / float64(r.Images)
	r.Loss /= float64(r.Images)
	if math.IsNaN(r.Loss) || math.IsInf(r.Loss, 0) {
		return r, errors.Errorf("accuracy: loss %v: the model's outputs are not finite", r.Loss)
	}
	return r, nil
}

// Units implements trainer.UnitNamer: losses in bits per image, items are
// images.
func (t *Task) Units() trainer.Units {
	return trainer.Units{Loss: "bits/image", Items: "images", ItemsShort: "img"}
}

// DataPath is recorded in checkpoints: where the training images came
// from.
func (t *Task) DataPath() string { return t.data.Train.Source }
