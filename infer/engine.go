package infer

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Engine serves one model: Parallelism sessions behind a Batcher, with the
// model's settings (post-processing, image pre-processing, batching) that
// codecs read. Safe for concurrent use; Close is idempotent.
type Engine struct {
	cfg      Config
	info     ModelInfo
	post     PostProcess
	sessions []*Session
	batcher  *Batcher

	closeOnce sync.Once
	closeErr  error
}

// New validates cfg (errors wrap ErrConfigValidation), resolves the model
// file (see ModelFile), loads cfg.Parallelism sessions and warms each up
// once with zeros where the input shapes allow. Init must have been called
// (else ErrNotInitialized).
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	post, _ := ParsePostProcessing(cfg.PostProcessing)
	file, err := ModelFile(cfg.ModelPath)
	if err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, post: post}
	for range cfg.Parallelism {
		s, err := NewSession(file, cfg.Threads)
		if err != nil {
			e.closeSessions()
			return nil, err
		}
		e.sessions = append(e.sessions, s)
	}
	e.info = e.sessions[0].Info()
	e.info.Image = cfg.imagePre()
	for _, s := range e.sessions {
		warmUp(s)
	}
	e.batcher = NewBatcher(BatcherConfig{
		Runners:     cfg.Parallelism,
		MaxBatch:    cfg.MaxBatch,
		MaxWait:     cfg.MaxWait,
		QueueSize:   cfg.QueueSize,
		Unbatchable: !e.info.DynamicBatch,
		OnBatch:     cfg.Hooks.Batch,
		OnRun: func(ctx context.Context, d time.Duration) {
			if cfg.Hooks.Stage != nil {
				cfg.Hooks.Stage(ctx, StageInfer, d)
			}
		},
	}, func(r int, inputs []Tensor) ([]Tensor, error) {
		return e.sessions[r].Run(inputs)
	})
	return e, nil
}

// warmUp runs s once on zeros (dynamic dims = 1) so that the first request
// does not pay for ONNX Runtime's lazy initialisation. A model that rejects
// zeros is not an error: the first request warms it instead.
func warmUp(s *Session) {
	inputs := make([]Tensor, 0, len(s.info.Inputs))
	for _, in := range s.info.Inputs {
		if len(in.Shape) == 0 {
			return
		}
		shape := make([]int64, len(in.Shape))
		for i, d := range in.Shape {
			if d < 0 {
				d = 1
			}
			shape[i] = d
		}
		inputs = append(inputs, NewTensor(in.DType, shape))
	}
	_, _ = s.Run(inputs)
}

// Info returns the model's description.
func (e *Engine) Info() ModelInfo { return e.info }

// Infer runs records through the batcher. Each record holds one tensor per
// model input in model order, without the batch dim (or with it when
// InputAlreadyBatched); outputs come back the same way. A record that does
// not fit the model returns an *InputError naming it; ErrQueueFull,
// ErrClosed, ctx errors and run errors are returned as they come.
func (e *Engine) Infer(ctx context.Context, records [][]Tensor) ([][]Tensor, error) {
	batched := make([][]Tensor, len(records))
	for i, rec := range records {
		b, err := e.prepare(i, rec)
		if err != nil {
			return nil, err
		}
		batched[i] = b
	}
	outs, err := e.batcher.Submit(ctx, batched)
	if err != nil {
		return nil, err
	}
	if !e.cfg.InputAlreadyBatched {
		for _, rec := range outs {
			for j, t := range rec {
				if len(t.Shape) > 0 && t.Shape[0] == 1 {
					rec[j].Shape = t.Shape[1:]
				}
			}
		}
	}
	return outs, nil
}

// prepare checks a record against the model and gives it its batch dim.
func (e *Engine) prepare(i int, rec []Tensor) ([]Tensor, error) {
	ins := e.info.Inputs
	if len(rec) != len(ins) {
		return nil, NewInputError(i, "", "got %d inputs, model has %d", len(rec), len(ins))
	}
	out := make([]Tensor, len(rec))
	rows := int64(-1)
	for j, t := range rec {
		in := ins[j]
		if t.DType != in.DType {
			return nil, NewInputError(i, in.Name, "wrong dtype: got %s, want %s", t.DType, in.DType)
		}
		if err := t.Check(); err != nil {
			return nil, NewInputError(i, in.Name, "%v", err)
		}
		if !e.cfg.InputAlreadyBatched {
			t.Shape = append([]int64{1}, t.Shape...)
		}
		if !FitsShape(t.Shape, in.Shape) {
			got := t.Shape
			if !e.cfg.InputAlreadyBatched {
				got = got[1:]
			}
			return nil, NewInputError(i, in.Name, "shape %s does not match model %s", ShapeString(got), ShapeString(in.Shape))
		}
		if rows >= 0 && t.Shape[0] != rows {
			return nil, NewInputError(i, in.Name, "batch dim %d differs from the other inputs' %d", t.Shape[0], rows)
		}
		rows = t.Shape[0]
		out[j] = t
	}
	return out, nil
}

// PostProcess returns the configured post-processing (Config.PostProcessing,
// parsed); its zero value means none. Codecs apply it to answers.
func (e *Engine) PostProcess() PostProcess { return e.post }

// AlreadyBatched reports Config.InputAlreadyBatched: records passed to
// Infer carry their batch dim.
func (e *Engine) AlreadyBatched() bool { return e.cfg.InputAlreadyBatched }

// Hooks returns the configured Hooks, so that what runs before and after
// Infer (decoding, encoding) reports its stages to the same observer.
func (e *Engine) Hooks() Hooks { return e.cfg.Hooks }

// Close stops the batcher (queued records fail with ErrClosed), waits for
// running batches and destroys the sessions. Idempotent.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		e.closeErr = errors.Join(e.batcher.Close(), e.closeSessions())
	})
	return e.closeErr
}

func (e *Engine) closeSessions() error {
	var errs []error
	for _, s := range e.sessions {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
