package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
	"github.com/cluster-serving/cluster-serving/infer/status"
	"github.com/cluster-serving/cluster-serving/infer/timing"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

var tracer = otel.Tracer(telemetry.ScopeName + "/pipeline")

// Caller submits a step's request to its model's job and waits for the
// answer: a *mesh.Client.
type Caller interface {
	Submit(ctx context.Context, job string, req mesh.Request) (mesh.Result, error)
}

// Pipeline runs the requests of one ensemble: it is the Runner
// (wire.Runner) of the ensemble's worker. Safe for concurrent use.
type Pipeline struct {
	g     *Graph
	call  Caller
	slots []chan struct{} // per step (by index): max_inflight_requests; nil: none
	all   map[int]bool    // the steps every output needs (g.needed of all); read-only
}

// New returns the Pipeline of g, whose steps c submits.
func New(g *Graph, c Caller) *Pipeline {
	p := &Pipeline{g: g, call: c, slots: make([]chan struct{}, len(g.steps)), all: g.needed(g.info.OutputNames())}
	if g.inflight > 0 {
		for i := range p.slots {
			p.slots[i] = make(chan struct{}, g.inflight)
		}
	}
	return p
}

// Infer runs records through the ensemble, every output wanted.
func (p *Pipeline) Infer(ctx context.Context, records [][]infer.Tensor) ([][]infer.Tensor, error) {
	return p.InferOutputs(ctx, records, nil)
}

// InferOutputs runs records through the ensemble and returns, per
// record, one tensor per ensemble output (a zero Tensor for one not in
// outputs; nil outputs means all). Records without the batch dim (the
// rows a JSON or Redis codec decodes) run together as one batch of the
// ensemble; a record with it (an OIP request, whole) runs alone. A step's
// error names the step and keeps its status: 400-class for bad input,
// 503 for one worth retrying.
func (p *Pipeline) InferOutputs(ctx context.Context, records [][]infer.Tensor, outputs []string) ([][]infer.Tensor, error) {
	if err := p.checkOutputs(outputs); err != nil {
		return nil, err
	}
	var rows []int
	for i, rec := range records {
		if p.isRow(rec) {
			rows = append(rows, i)
		}
	}
	out := make([][]infer.Tensor, len(records))
	g, gctx := errgroup.WithContext(ctx)
	if len(rows) > 0 {
		g.Go(func() error { return p.runRows(gctx, records, rows, outputs, out) })
	}
	for i, rec := range records {
		if p.isRow(rec) {
			continue
		}
		g.Go(func() (err error) {
			rec, added := p.withDim(rec)
			if out[i], err = p.run(gctx, rec, outputs); err == nil && added {
				for j, t := range out[i] {
					if len(t.Shape) > 0 && t.Shape[0] == 1 {
						out[i][j].Shape = t.Shape[1:]
					}
				}
			}
			return err
		})
	}
	return out, g.Wait()
}

func (p *Pipeline) checkOutputs(outputs []string) error {
	for _, o := range outputs {
		if !slices.Contains(p.g.info.OutputNames(), o) {
			return infer.NewInputError(-1, "", "unknown output %q: the ensemble's outputs are %v", o, p.g.info.OutputNames())
		}
	}
	return nil
}

// lacksDim reports whether rec's tensors have one dim fewer than the
// ensemble's inputs: a codec cut the leading dim off (a JSON instance).
func (p *Pipeline) lacksDim(rec []infer.Tensor) bool {
	return len(rec) > 0 && len(rec[0].Shape) == len(p.g.info.Inputs[0].Shape)-1
}

// isRow reports whether rec is a row of a batching ensemble: it runs
// stacked with the request's other rows.
func (p *Pipeline) isRow(rec []infer.Tensor) bool { return p.g.maxBatch > 0 && p.lacksDim(rec) }

// withDim gives a record of an ensemble without a batch dim of its own
// the leading dim of 1 its inputs declare, when a codec cut it off, as
// the engine does for a model that does not batch; added reports whether
// it did.
func (p *Pipeline) withDim(rec []infer.Tensor) ([]infer.Tensor, bool) {
	if p.g.maxBatch != 0 || !p.lacksDim(rec) {
		return rec, false
	}
	out := make([]infer.Tensor, len(rec))
	for j, t := range rec {
		t.Shape = append([]int64{1}, t.Shape...)
		out[j] = t
	}
	return out, true
}

// runRows stacks the row records at idx into one batch, runs it and cuts
// its outputs back into out.
func (p *Pipeline) runRows(ctx context.Context, records [][]infer.Tensor, idx []int, outputs []string, out [][]infer.Tensor) error {
	if n := len(idx); n > int(p.g.maxBatch) {
		return infer.NewInputError(-1, "", "batch of %d rows exceeds the ensemble's max_batch_size %d", n, p.g.maxBatch)
	}
	batch := make([]infer.Tensor, len(p.g.info.Inputs))
	for j := range batch {
		col := make([]infer.Tensor, len(idx))
		for k, i := range idx {
			t := records[i][j]
			t.Shape = append([]int64{1}, t.Shape...)
			col[k] = t
		}
		var err error
		if batch[j], err = infer.Stack(col); err != nil {
			return infer.NewInputError(-1, p.g.info.Inputs[j].Name, "rows do not stack: %v", err)
		}
	}
	res, err := p.run(ctx, batch, outputs)
	if err != nil {
		return err
	}
	ones := make([]int64, len(idx))
	for k := range ones {
		ones[k] = 1
	}
	for _, i := range idx {
		out[i] = make([]infer.Tensor, len(res))
	}
	for j, t := range res {
		if t.Data == nil {
			continue // not asked for
		}
		parts, err := infer.Split(t, ones)
		if err != nil {
			return fmt.Errorf("ensemble %q: output %q: %w", p.g.name, p.g.info.Outputs[j].Name, err)
		}
		for k, i := range idx {
			parts[k].Shape = parts[k].Shape[1:]
			out[i][j] = parts[k]
		}
	}
	return nil
}

// run runs one request of the ensemble: inputs in the ensemble's input
// order, outputs in its output order.
func (p *Pipeline) run(ctx context.Context, inputs []infer.Tensor, outputs []string) ([]infer.Tensor, error) {
	if len(inputs) != len(p.g.info.Inputs) {
		return nil, infer.NewInputError(-1, "", "got %d inputs, the ensemble has %d", len(inputs), len(p.g.info.Inputs))
	}
	r := &request{tensors: make(map[string]infer.Tensor, len(inputs)), done: map[int]chan struct{}{}}
	for j, in := range p.g.info.Inputs {
		r.tensors[in.Name] = inputs[j]
	}
	wanted, need := p.g.info.OutputNames(), p.all
	if outputs != nil {
		wanted, need = outputs, p.g.needed(outputs)
	}
	for _, s := range p.g.steps {
		if need[s.index] {
			r.done[s.index] = make(chan struct{})
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range p.g.steps {
		if !need[s.index] {
			continue
		}
		g.Go(func() error { return p.runStep(gctx, r, s) })
	}
	err := g.Wait()
	if tr := timing.From(ctx); tr != nil {
		// As Triton's ensemble scheduler: the ensemble's compute is the
		// sum of its steps' (each step's worker sends its own).
		c := r.compute
		tr.AddRows(rowsOf(inputs, p.g.maxBatch))
		tr.Add(timing.Input, c.Input)
		tr.Add(timing.Infer, c.Infer)
		tr.Add(timing.Output, c.Output)
		if sink := tr.Sink(); sink != nil && err == nil {
			sink.Execution(rowsOf(inputs, p.g.maxBatch), c.Input, c.Infer, c.Output)
		}
	}
	if err != nil {
		return nil, err
	}
	out := make([]infer.Tensor, len(p.g.info.Outputs))
	for j, o := range p.g.info.Outputs {
		if slices.Contains(wanted, o.Name) {
			out[j] = r.tensors[o.Name]
		}
	}
	return out, nil
}

// rowsOf is the rows of one request: its batch dim, 1 without one.
func rowsOf(inputs []infer.Tensor, maxBatch int32) int64 {
	if maxBatch > 0 && len(inputs) > 0 && len(inputs[0].Shape) > 0 {
		return inputs[0].Shape[0]
	}
	return 1
}

// request is one run's tensors and the steps' completion.
type request struct {
	mu      sync.Mutex
	tensors map[string]infer.Tensor
	done    map[int]chan struct{} // per needed step: closed when its outputs are in tensors
	compute timing.Times          // the steps' compute times, summed
}

func (r *request) get(name string) infer.Tensor {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tensors[name]
}

// runStep waits for the steps s needs, then submits s.
func (p *Pipeline) runStep(ctx context.Context, r *request, s *step) error {
	for _, in := range s.inputs {
		if prod, ok := p.g.producer[in.tensor]; ok {
			select {
			case <-r.done[prod]:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	if slot := p.slots[s.index]; slot != nil {
		select {
		case slot <- struct{}{}:
			defer func() { <-slot }()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ins := make([]infer.Tensor, len(s.inputs))
	for i, in := range s.inputs {
		ins[i] = r.get(in.tensor)
	}
	outs, t, err := p.submit(ctx, s, ins)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.compute.Input += t.Input
	r.compute.Infer += t.Infer
	r.compute.Output += t.Output
	for i, o := range s.outputs {
		r.tensors[o.tensor] = outs[i]
	}
	r.mu.Unlock()
	close(r.done[s.index])
	return nil
}

// submit sends step s's inputs to its model's job and decodes the
// outputs it maps, in s.outputs order, under a span of the step, with
// the step worker's compute times.
func (p *Pipeline) submit(ctx context.Context, s *step, ins []infer.Tensor) ([]infer.Tensor, timing.Times, error) {
	ctx, span := tracer.Start(ctx, telemetry.SpanStep, withStepAttrs(p.g.name, s))
	defer span.End()
	body, err := encodeStep(s, ins)
	if err == nil {
		var res mesh.Result
		sched := mesh.ScheduleFrom(ctx).Step(modelconfig.QueueOf(s.member.Config))
		res, err = p.call.Submit(ctx, s.member.Job, mesh.Request{ContentType: stepContentType, Body: body, Schedule: sched})
		if err == nil {
			var outs []infer.Tensor
			if outs, err = decodeStep(s, res.Body); err == nil {
				return outs, res.Compute, nil
			}
		}
	}
	err = p.stepError(s, err)
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	return nil, timing.Times{}, err
}

func withStepAttrs(ensemble string, s *step) trace.SpanStartOption {
	return trace.WithAttributes(
		attribute.String("cs.ensemble", ensemble),
		attribute.Int("cs.step", s.index),
		attribute.String("cs.model", s.member.Name),
		attribute.String("cs.model_version", s.member.Version),
		attribute.String("cs.job", s.member.Job),
	)
}

// stepError names the step in err and keeps its status (a timeout the
// caller's, 499 its cancel, 503 a full or unreachable queue).
func (p *Pipeline) stepError(s *step, err error) error {
	msg := err.Error()
	var se *status.Error
	if errors.As(err, &se) {
		msg = se.Message
	}
	return status.Errorf(status.Of(err), "ensemble %q step %d (model %q version %s): %s", p.g.name, s.index, s.member.Name, s.member.Version, msg)
}

// needed marks the steps that the outputs wanted need, directly or
// through other steps.
func (g *Graph) needed(wanted []string) map[int]bool {
	need := map[int]bool{}
	var mark func(tensor string)
	mark = func(tensor string) {
		i, ok := g.producer[tensor]
		if !ok || need[i] {
			return
		}
		need[i] = true
		for _, s := range g.steps {
			if s.index == i {
				for _, in := range s.inputs {
					mark(in.tensor)
				}
			}
		}
	}
	for _, w := range wanted {
		mark(w)
	}
	return need
}
