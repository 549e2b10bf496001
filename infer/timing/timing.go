// Package timing carries one request's stage times from the code that
// runs it (infer's Batcher, infer/wire's codecs) up to the mesh worker
// that counts them (Triton's statistics extension), through ctx. It
// depends on nothing, as infer/status, so that mesh counts them without
// linking infer.
package timing

import (
	"context"
	"sync/atomic"
	"time"
)

// Sink receives the model runs (executions) of the requests that name it:
// a mesh worker's counters. Execution is called from the runner that ran
// the batch, before the batch's results are handed out; it must be safe
// for concurrent use and must not block.
type Sink interface {
	// Execution reports one successful model run of rows rows: the time
	// it took to stack the inputs, to run the model and to cut the
	// outputs back into the requests' rows.
	Execution(rows int64, input, infer, output time.Duration)
}

// Request collects one request's stage times while it runs. Its methods
// are safe for concurrent use (the records of a large request run in
// several batches at once) and are no-ops on a nil *Request, so code
// that runs a request without one (a test, a direct caller) pays a nil
// check. Every time is added before the request's results are handed
// back, so its caller reads them complete.
type Request struct {
	// Arrived is when the request arrived (its door took it, or its
	// publish was stored); whoever makes the Request sets it before
	// sharing it.
	Arrived time.Time
	sink    Sink
	rows    atomic.Int64
	stages  [numStages]atomic.Int64
}

// Times is a snapshot of a Request.
type Times struct {
	// Rows is the rows the request's records hold (a request of batch b
	// holds b), over the runs that served it.
	Rows int64
	// Queue is the time its records waited in the batcher's queue;
	// Input decoding and stacking them; Infer the model runs; Output
	// cutting the outputs back and encoding the answer.
	Queue, Input, Infer, Output time.Duration
}

type ctxKey struct{}

// requestCtx is a ctx carrying a Request, both in one allocation.
type requestCtx struct {
	context.Context
	r Request
}

func (c *requestCtx) Value(key any) any {
	if key == (ctxKey{}) {
		return &c.r
	}
	return c.Context.Value(key)
}

// New returns ctx carrying a new Request whose model runs go to sink (nil:
// none), and the Request.
func New(ctx context.Context, sink Sink) (context.Context, *Request) {
	c := &requestCtx{Context: ctx}
	c.r.sink = sink
	return c, &c.r
}

// From returns the Request ctx carries, nil when none.
func From(ctx context.Context) *Request {
	r, _ := ctx.Value(ctxKey{}).(*Request)
	return r
}

// Sink returns the Sink the request's model runs go to; nil for a nil
// Request.
func (r *Request) Sink() Sink {
	if r == nil {
		return nil
	}
	return r.sink
}

// AddRows adds n rows the request asked to run.
func (r *Request) AddRows(n int64) {
	if r != nil {
		r.rows.Add(n)
	}
}

// Stage is a part of a request's time (Times).
type Stage int

// The stages of Times.
const (
	Queue Stage = iota
	Input
	Infer
	Output
	numStages
)

// Add adds d to stage s of the request.
func (r *Request) Add(s Stage, d time.Duration) {
	if r != nil {
		r.stages[s].Add(int64(d))
	}
}

// Times returns the times added so far; zero for a nil Request.
func (r *Request) Times() Times {
	if r == nil {
		return Times{}
	}
	d := func(s Stage) time.Duration { return time.Duration(r.stages[s].Load()) }
	return Times{Rows: r.rows.Load(), Queue: d(Queue), Input: d(Input), Infer: d(Infer), Output: d(Output)}
}
