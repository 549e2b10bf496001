package redisdoor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// Mesh is what the door needs from the mesh; *mesh.Client implements it.
// Its methods must be safe for concurrent use.
type Mesh interface {
	// EnqueueBatch stores reqs in job's work queue, together where it
	// can, and returns once each is stored or refused: errs[i] is nil
	// once JetStream holds reqs[i], or mesh.ErrQueueFull, an error
	// wrapping status.ErrTooLarge for a body NATS cannot take, or another
	// error.
	EnqueueBatch(ctx context.Context, job string, reqs []mesh.Request, resultSubject string) (errs []error)
	// ConsumeResultBatches hands the results published to
	// ResultsSubject(job, door) to handle, in batches, through the durable
	// consumer durable, and acks a batch once handle returned nil. It blocks
	// until ctx ends.
	ConsumeResultBatches(ctx context.Context, job, durable, door string, maxBatch int, handle func(context.Context, []mesh.Result) error) error
}

// Stats counts what a Door did since New.
type Stats struct {
	Enqueued int64 // entries handed to the mesh
	Skipped  int64 // of those, entries the consumer group had skipped
	Bad      int64 // entries the door answered NaN itself (no data, refused by the mesh), or acked without a uri
	Written  int64 // results written to Redis
}

// Door serves one job's Redis stream: it owns its Redis connection pool,
// which Run closes on return, so Run it once. Stats is safe for concurrent
// use.
type Door struct {
	cfg Config
	m   Mesh
	log *slog.Logger
	rdb *goredis.Client

	enqueued, skipped, bad, written atomic.Int64
	writeFailing                    atomic.Bool

	// lim logs each repeated failure (a retry, a NaN answer, a refused
	// write) once per cause with a count, never once per record or retry.
	lim *telemetry.LogLimit
}

// New checks cfg and returns a Door logging to logger (nothing when nil);
// it connects nothing until Run. The first New given a logger also routes
// go-redis's own log, which is process-wide, through it (routeGoredisLog).
// It returns an error wrapping ErrInvalidConfig for a bad cfg.
func New(cfg Config, m Mesh, logger *slog.Logger) (*Door, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("%w: nil Mesh", ErrInvalidConfig)
	}
	cfg.defaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	} else {
		routeGoredisLog(logger)
	}
	opt, _ := cfg.options() // checked by Validate
	log := logger.With("door", "redis", "job", cfg.Job)
	return &Door{cfg: cfg, m: m, log: log, rdb: goredis.NewClient(opt), lim: telemetry.NewLogLimit(log, 0)}, nil
}

// Stats returns the counters.
func (d *Door) Stats() Stats {
	return Stats{Enqueued: d.enqueued.Load(), Skipped: d.skipped.Load(), Bad: d.bad.Load(), Written: d.written.Load()}
}

// Run serves the stream until ctx ends. On the way out it lets the
// enqueues and result writes in flight finish; entries not yet handed over
// stay pending in Redis and are reclaimed by the next Run. It returns nil
// after ctx ended, or the error that made it stop (a bad job name, results
// consumer that cannot start).
func (d *Door) Run(ctx context.Context) error {
	defer d.rdb.Close()
	defer d.cfg.Metrics.OpenDoor(telemetry.DoorRedis, d.cfg.Addr)()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return d.ingest(gctx) })
	g.Go(func() error {
		return d.m.ConsumeResultBatches(gctx, d.cfg.Job, d.cfg.Durable, DoorName, d.cfg.Batch, d.writeResults)
	})
	err := g.Wait()
	d.lim.Flush(context.WithoutCancel(ctx))
	st := d.Stats()
	d.log.Info("redis door stopped", "enqueued", st.Enqueued, "skipped", st.Skipped, "bad", st.Bad, "written", st.Written)
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		return nil
	}
	return err
}

// try runs fn; on error it logs, waits RetryInterval and reports false.
func (d *Door) try(ctx context.Context, what string, fn func(context.Context) error) bool {
	err := fn(ctx)
	if err == nil {
		return true
	}
	if ctx.Err() == nil {
		d.lim.Log(ctx, slog.LevelWarn, what+"; retrying", err)
		d.sleep(ctx, d.cfg.RetryInterval)
	}
	return false
}

func (d *Door) sleep(ctx context.Context, dt time.Duration) {
	t := time.NewTimer(dt)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
