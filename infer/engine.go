package infer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
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
	div      divPlan  // integer divisions fed by the request (divguard.go)
	reshape  reshapes // Config.Reshape against the graph (reshape.go)

	closeOnce sync.Once
	closeErr  error
}

// New validates cfg (errors wrap ErrConfigValidation), resolves the model
// file (see ModelFile), decrypts it in memory when cfg.ModelKey is set (a
// file that does not decrypt wraps ErrDecrypt), reads its graph to guard integer division (see
// divguard.go: a constant zero divisor fails the load), loads
// cfg.Parallelism sessions and warms each up once with ones (see warmUp;
// skipped when the graph divides integers by a value it computes). Init
// must have been called (else ErrNotInitialized). A panic while loading is
// logged with its stack and returned as an error.
func New(cfg Config) (e *Engine, err error) {
	// Loading reads an outside file through cgo bindings: a panic in them
	// fails this load, not the process.
	defer func() {
		if p := recover(); p != nil {
			slog.Error("infer: load panicked", "model", cfg.ModelPath, "panic", p, "stack", string(debug.Stack()))
			if e != nil {
				_ = e.closeSessions()
			}
			e, err = nil, fmt.Errorf("load model %q: panic: %v", cfg.ModelPath, p)
		}
	}()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	post, _ := ParsePostProcessing(cfg.PostProcessing)
	file, err := ModelFile(cfg.ModelPath)
	if err != nil {
		return nil, err
	}
	data, div, err := readGraph(file, cfg.ModelKey)
	if err != nil {
		return nil, err
	}
	e = &Engine{cfg: cfg, post: post, div: div}
	for range cfg.Parallelism {
		s, err := newSession(file, data, cfg.Threads, cfg.ExecutionProvider, cfg.ThreadSpinning)
		if err != nil {
			e.closeSessions()
			return nil, err
		}
		e.sessions = append(e.sessions, s)
	}
	graph, plan, err := applyReshapes(e.sessions[0].Info(), cfg.Reshape)
	if err != nil {
		e.closeSessions()
		return nil, fmt.Errorf("load model %q: %w", file, err)
	}
	e.reshape = plan
	if e.info, err = DecideBatching(graph, cfg.Batching); err != nil {
		e.closeSessions()
		return nil, fmt.Errorf("load model %q: %w", file, err)
	}
	e.info.Image = cfg.imagePre()
	if e.div.bind(e.info) {
		for _, s := range e.sessions {
			warmUp(s)
		}
	}
	e.batcher = NewBatcher(BatcherConfig{
		Runners:     cfg.Parallelism,
		MaxBatch:    cfg.MaxBatch,
		MaxWait:     cfg.MaxWait,
		QueueSize:   cfg.QueueSize,
		Unbatchable: !e.info.DynamicBatch,
		HoldIdle:    cfg.HoldIdle,
		Preferred:   cfg.PreferredBatch,
		OnBatch:     cfg.Hooks.Batch,
		OnRun: func(ctx context.Context, d time.Duration) {
			if cfg.Hooks.Stage != nil {
				cfg.Hooks.Stage(ctx, StageInfer, d)
			}
		},
	}, func(r int, inputs []Tensor) ([]Tensor, error) {
		return e.reshape.run(e.sessions[r], inputs)
	})
	return e, nil
}

// newSession is openSession; tests replace it to make a load panic.
var newSession = openSession

// readGraph reads file (decrypted with key when set) and plans its
// division guards before ONNX Runtime reads it: a constant zero divisor can
// trap while ONNX Runtime folds constants at load. data is the decrypted
// model the sessions load from memory, or nil for a plain model, which
// loads from its path (where external weights resolve).
func readGraph(file string, key *Key) (data []byte, div divPlan, err error) {
	data, err = ReadModel(file, key)
	if err != nil {
		return nil, divPlan{}, err
	}
	if div, err = planDivision(file, data); err != nil {
		return nil, divPlan{}, err
	}
	if key == nil {
		data = nil
	}
	return data, div, nil
}

// ReadModel reads modelFile and, when key is set, decrypts it in memory
// (Key.OpenModel: the original's encrypted model files). A file that does
// not decrypt returns an error wrapping ErrDecrypt that names the file.
func ReadModel(modelFile string, key *Key) ([]byte, error) {
	b, err := os.ReadFile(modelFile)
	if err != nil {
		return nil, fmt.Errorf("load model %q: %w", modelFile, err)
	}
	if key == nil {
		return b, nil
	}
	plain, err := key.OpenModel(b)
	if err != nil {
		return nil, fmt.Errorf("load model %q (modelEncrypted): %w", modelFile, err)
	}
	return plain, nil
}

// warmUp runs s once on ones (dynamic dims = 1) so that the first request
// does not pay for ONNX Runtime's lazy initialisation. Ones, not zeros: a
// model that divides integers (Div or Mod on int32 or uint8) raises SIGFPE
// on a zero divisor inside ONNX Runtime's C++ kernel, which no Go recover
// can catch, so zeros would kill the process at load. A model that rejects
// ones, or has no inputs, is not an error: the first request warms it.
func warmUp(s *Session) {
	if len(s.info.Inputs) == 0 {
		return
	}
	inputs := make([]Tensor, 0, len(s.info.Inputs))
	for _, in := range s.info.Inputs {
		shape := make([]int64, len(in.Shape))
		for i, d := range in.Shape {
			if d < 0 {
				d = 1
			}
			shape[i] = d
		}
		inputs = append(inputs, onesTensor(in.DType, shape))
	}
	_, _ = s.Run(inputs)
}

// onesTensor returns a tensor of dtype dt and the given shape filled with
// ones (true for Bool, "1" for String).
func onesTensor(dt DType, shape []int64) Tensor {
	t := NewTensor(dt, shape)
	switch d := t.Data.(type) {
	case []float32:
		fill(d, 1)
	case []float64:
		fill(d, 1)
	case []int32:
		fill(d, 1)
	case []int64:
		fill(d, 1)
	case []uint8:
		fill(d, 1)
	case []bool:
		fill(d, true)
	case []int8:
		fill(d, 1)
	case []int16:
		fill(d, 1)
	case []uint16:
		fill(d, 1)
	case []uint32:
		fill(d, 1)
	case []uint64:
		fill(d, 1)
	case []F16:
		fill(d, F16From(1))
	case []BF16:
		fill(d, BF16From(1))
	case []string:
		fill(d, "1") // a string a Cast to a number takes
	}
	return t
}

func fill[T any](s []T, v T) {
	for i := range s {
		s[i] = v
	}
}

// Info returns the model's description.
func (e *Engine) Info() ModelInfo { return e.info }

// Infer runs records through the batcher. Each record holds one tensor per
// model input in model order, without the batch dim (or with it when
// InputAlreadyBatched); outputs come back the same way. A tensor whose rank
// is already the model input's (a scalar for a scalar input, or a whole
// request a codec could not split into rows) goes to the model untouched,
// and a record made only of such tensors gets its outputs untouched too. A
// request of any number of records is served (see submit). A record that
// does not fit the model, or holds a zero integer divisor (see
// divguard.go), returns an *InputError naming it;
// ErrQueueFull, ErrClosed, ctx errors and run errors are returned as they
// come.
func (e *Engine) Infer(ctx context.Context, records [][]Tensor) ([][]Tensor, error) {
	batched := make([][]Tensor, len(records))
	added := make([]bool, len(records))
	for i, rec := range records {
		b, add, err := e.prepare(i, rec)
		if err != nil {
			return nil, err
		}
		batched[i], added[i] = b, add
	}
	outs, err := e.submit(ctx, batched)
	if err != nil {
		return nil, err
	}
	for i, rec := range outs {
		if !added[i] {
			continue
		}
		for j, t := range rec {
			if len(t.Shape) > 0 && t.Shape[0] == 1 {
				rec[j].Shape = t.Shape[1:]
			}
		}
	}
	return outs, nil
}

// submit hands records to the batcher. A request of more records than
// one batch holds goes in chunks of at most MaxBatch records (QueueSize
// if smaller), at most Parallelism chunks at a time, and the outputs are
// joined in order: so a request larger than the queue is served, in
// several batches, instead of failing with ErrQueueFull however often it
// is retried, and it never holds more of the queue than its runners can
// take, leaving room for other callers' records. The first error (a
// record's, ErrQueueFull, ctx's) fails the whole request.
func (e *Engine) submit(ctx context.Context, records [][]Tensor) ([][]Tensor, error) {
	size := min(e.cfg.MaxBatch, e.cfg.QueueSize)
	if len(records) <= size {
		return e.batcher.Submit(ctx, records)
	}
	out := make([][]Tensor, len(records))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(e.cfg.Parallelism)
	for lo := 0; lo < len(records); lo += size {
		hi := min(lo+size, len(records))
		g.Go(func() error {
			res, err := e.batcher.submitAt(gctx, records[lo:hi], lo)
			copy(out[lo:hi], res)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// prepare checks a record against the model and gives it its batch dim
// where it lacks one; added reports whether any tensor got one.
func (e *Engine) prepare(i int, rec []Tensor) (out []Tensor, added bool, err error) {
	ins := e.info.Inputs
	if len(rec) != len(ins) {
		return nil, false, NewInputError(i, "", "got %d inputs, model has %d", len(rec), len(ins))
	}
	out = make([]Tensor, len(rec))
	rows := int64(-1)
	for j, t := range rec {
		in := ins[j]
		if t.DType != in.DType {
			return nil, false, NewInputError(i, in.Name, "wrong dtype: got %s, want %s", t.DType, in.DType)
		}
		if err := t.Check(); err != nil {
			return nil, false, NewInputError(i, in.Name, "%v", err)
		}
		// A string ONNX Runtime cannot take fails here, not its batch.
		if d, ok := t.Data.([]string); ok {
			if err := checkStrings(in.Name, d); err != nil {
				err.Instance = i
				return nil, false, err
			}
		}
		add := !e.cfg.InputAlreadyBatched && len(t.Shape) == len(in.Shape)-1
		if add {
			t.Shape = append([]int64{1}, t.Shape...)
			added = true
		}
		if m := e.cfg.MaxRequestBatch; m > 0 && len(t.Shape) > 0 && t.Shape[0] > int64(m) {
			return nil, false, NewInputError(i, in.Name, "batch size %d exceeds the model's max_batch_size %d (config.pbtxt)", t.Shape[0], m)
		}
		if !FitsShape(t.Shape, in.Shape) {
			got := t.Shape
			if add {
				got = got[1:]
			}
			return nil, false, NewInputError(i, in.Name, "shape %s does not match model %s", ShapeString(got), ShapeString(in.Shape))
		}
		// Only a model that batches along dim 0 needs its inputs to agree
		// on it; the others run each record whole.
		if e.info.DynamicBatch {
			if rows >= 0 && t.Shape[0] != rows {
				return nil, false, NewInputError(i, in.Name, "batch dim %d differs from the other inputs' %d", t.Shape[0], rows)
			}
			rows = t.Shape[0]
		}
		out[j] = t
	}
	if err := e.div.check(i, out); err != nil {
		return nil, false, err
	}
	return out, added, nil
}

// RecordKey is Config.RecordKey: the key the Redis codecs decrypt record
// images with, or nil.
func (e *Engine) RecordKey() *Key { return e.cfg.RecordKey }

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
