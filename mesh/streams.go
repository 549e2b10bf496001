package mesh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Defaults applied by StreamConfig for zero fields.
const (
	DefaultReplicas      = 1
	DefaultMaxMsgs       = 100_000
	DefaultMaxBytes      = 1 << 30 // 1 GiB
	DefaultAckWait       = 10 * time.Second
	DefaultMaxDeliver    = 5
	DefaultMaxAckPending = 1024
	DefaultResultTTL     = 10 * time.Minute
	DefaultBackoff       = 500 * time.Millisecond
	// DuplicateWindow is how long JetStream remembers Nats-Msg-Id values.
	DuplicateWindow = 2 * time.Minute
	// maxBackoff caps the growing nak delay.
	maxBackoff = time.Minute
)

// StreamConfig describes a job's work queue, its shared consumer and its
// results stream. The zero value, with Job set, means all defaults.
type StreamConfig struct {
	// Job names the job; it must match ^[A-Za-z0-9_-]+$. Required.
	Job string
	// Replicas is the number of stream replicas. Default 1; 3 in production.
	Replicas int
	// Partitions is the number of streams the work queue (and the results)
	// is split into, each with its own leader, so that a door can publish
	// to another when one leader dies (see partition.go). Default 1 when
	// Replicas is 1, DefaultPartitions (3) when Replicas > 1; at most
	// MaxPartitions. Lowering it strands records in the partitions no
	// longer named only if no worker runs: workers consume every
	// partition the server has.
	Partitions int
	// Storage is where both streams keep messages. Default (zero) file.
	Storage jetstream.StorageType
	// MaxMsgs bounds the work queue in messages, split evenly over the
	// partitions; a full queue rejects new requests (ErrQueueFull).
	// Default 100,000; -1 means unlimited.
	MaxMsgs int64
	// MaxBytes bounds the work queue in bytes, split evenly over the
	// partitions. Default 1 GiB; -1 unlimited.
	MaxBytes int64
	// AckWait is how long a worker may hold a message before JetStream
	// redelivers it, and so how long the records a killed worker held wait
	// for another. Workers beat every record they hold. Default 10s.
	AckWait time.Duration
	// MaxDeliver is how many attempts a record gets before the worker gives
	// up with a 500 result. The consumer allows one more delivery so a
	// worker can end a record whose attempts all crashed. Default 5.
	MaxDeliver int
	// MaxAckPending bounds unacknowledged messages across all workers, per
	// partition. Default 1024.
	MaxAckPending int
	// ResultTTL is how long the results stream keeps a result. Default 10m.
	ResultTTL time.Duration
	// Backoff is the first retry delay after a failed attempt; it doubles
	// with each delivery up to one minute. Default 500ms.
	Backoff time.Duration
	// Levels is the job's priority levels (Triton's priority_levels):
	// each level k but the default has its own subject and consumer in
	// every partition (schedule.go). 0 or 1: one level. Only a worker,
	// which knows its model's config, makes the levels' consumers.
	Levels int
	// DefaultLevel is the level (1..Levels) whose requests take the
	// partition's own subject, as requests without a priority do: it
	// has no consumer of its own.
	DefaultLevel int
	// MaxQueue bounds each priority level's queue, per partition's share
	// (max_queue_size, plus what runs): the streams' per-subject limit,
	// refusing what passes it. 0 leaves the streams' limit as it is (a
	// door's or a node's ensure, which knows no model config); -1 means
	// none.
	MaxQueue int64
}

// Validate reports the first invalid field, wrapping ErrInvalidConfig.
func (c StreamConfig) Validate() error {
	if err := ValidateJob(c.Job); err != nil {
		return fmt.Errorf("%w: Job: %w", ErrInvalidConfig, err)
	}
	switch {
	case c.Replicas < 0 || c.Replicas > 5:
		return fmt.Errorf("%w: Replicas %d not in 0..5", ErrInvalidConfig, c.Replicas)
	case c.Partitions < 0 || c.Partitions > MaxPartitions:
		return fmt.Errorf("%w: Partitions %d not in 0..%d", ErrInvalidConfig, c.Partitions, MaxPartitions)
	case c.Storage != jetstream.FileStorage && c.Storage != jetstream.MemoryStorage:
		return fmt.Errorf("%w: Storage %v unknown", ErrInvalidConfig, c.Storage)
	case c.MaxMsgs < -1:
		return fmt.Errorf("%w: MaxMsgs %d below -1", ErrInvalidConfig, c.MaxMsgs)
	case c.MaxBytes < -1:
		return fmt.Errorf("%w: MaxBytes %d below -1", ErrInvalidConfig, c.MaxBytes)
	case c.MaxQueue < -1:
		return fmt.Errorf("%w: MaxQueue %d below -1", ErrInvalidConfig, c.MaxQueue)
	case c.Levels < 0 || c.Levels > MaxLevels:
		return fmt.Errorf("%w: Levels %d not in 0..%d", ErrInvalidConfig, c.Levels, MaxLevels)
	}
	return CheckLimits(ErrInvalidConfig, Limit{"AckWait", c.AckWait}, Limit{"MaxDeliver", c.MaxDeliver},
		Limit{"MaxAckPending", c.MaxAckPending}, Limit{"ResultTTL", c.ResultTTL}, Limit{"Backoff", c.Backoff})
}

func (c StreamConfig) withDefaults() StreamConfig {
	c.Replicas = cmp.Or(c.Replicas, DefaultReplicas)
	if c.Partitions == 0 {
		c.Partitions = 1
		if c.Replicas > 1 {
			c.Partitions = DefaultPartitions
		}
	}
	c.MaxMsgs = cmp.Or(c.MaxMsgs, DefaultMaxMsgs)
	c.MaxBytes = cmp.Or(c.MaxBytes, DefaultMaxBytes)
	c.AckWait = cmp.Or(c.AckWait, DefaultAckWait)
	c.MaxDeliver = cmp.Or(c.MaxDeliver, DefaultMaxDeliver)
	c.MaxAckPending = cmp.Or(c.MaxAckPending, DefaultMaxAckPending)
	c.ResultTTL = cmp.Or(c.ResultTTL, DefaultResultTTL)
	c.Backoff = cmp.Or(c.Backoff, DefaultBackoff)
	return c
}

// backoff is the nak delay after the delivered-th failed attempt.
func (c StreamConfig) backoff(delivered uint64) time.Duration {
	d := c.Backoff
	for i := uint64(1); i < delivered && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// EnsureStreams creates or updates the job's work-queue partitions, each
// with its shared workers consumer, and its results partitions; then, on
// a cluster, it spreads their leaders over the servers (best effort). It
// is idempotent, and several processes may call it at start. It returns
// ErrInvalidConfig or the JetStream error wrapped with the object's name.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	for p := range cfg.Partitions {
		if err := retryTransient(ctx, func() error { return ensurePartition(ctx, js, cfg, p) }); err != nil {
			return err
		}
	}
	if cfg.Replicas > 1 && cfg.Partitions > 1 {
		spreadLeaders(ctx, js, cfg)
	}
	return nil
}

// jsErrCodeNoPeers is nats-server's JSClusterNoPeersErrF, "no suitable
// peers for placement": a replicated stream cannot be placed while a
// server is down or not yet known to the cluster. A 400, but it passes
// once the server is back, so it is retried as well.
const jsErrCodeNoPeers jetstream.ErrorCode = 10005

// ensureRetryFor bounds how long EnsureStreams retries a transient error.
const ensureRetryFor = time.Minute

// retryTransient runs fn until it succeeds, fails for good, ctx ends or
// ensureRetryFor passes. Several processes starting at once against a
// cluster make the meta leader answer some creates late (API timeouts) or
// with 503 "temporarily unavailable" while it applies the others', and a
// cluster that is forming or missing a server has no peers to place a
// replicated stream on: those are retried with a growing pause. Transient
// is what a publish retries (transient), plus "no peers". An API error that says the request is
// wrong (a 4xx, such as subjects overlapping another stream's) is not.
func retryTransient(ctx context.Context, fn func() error) error {
	giveUp := time.Now().Add(ensureRetryFor)
	pause := 250 * time.Millisecond
	for {
		err := fn()
		var apiErr *jetstream.APIError
		noPeers := errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrCodeNoPeers
		if err == nil || ctx.Err() != nil || time.Now().After(giveUp) || (!transient(err) && !noPeers) {
			return err
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return err
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// ensurePartition ensures partition p: its work stream, workers consumer
// and results stream.
func ensurePartition(ctx context.Context, js jetstream.JetStream, cfg StreamConfig, p int) error {
	job := cfg.Job
	work := jetstream.StreamConfig{
		Name:        PartitionStreamName(job, p),
		Description: fmt.Sprintf("cluster-serving work queue of job %s, partition %d of %d", job, p, cfg.Partitions),
		Subjects:    []string{PartitionSubject(job, p), PartitionSubject(job, p) + levelToken + "*"},
		Retention:   jetstream.LimitsPolicy, // workers purge what was answered: see purge.go
		Storage:     cfg.Storage,
		Replicas:    cfg.Replicas,
		MaxMsgs:     share(cfg.MaxMsgs, cfg.Partitions),
		MaxBytes:    share(cfg.MaxBytes, cfg.Partitions),
		Discard:     jetstream.DiscardNew,
		Duplicates:  DuplicateWindow,
	}
	if cfg.MaxQueue > 0 {
		work.MaxMsgsPerSubject, work.DiscardNewPerSubject = share(cfg.MaxQueue, cfg.Partitions), true
	}
	keepQueue := cfg.MaxQueue == 0
	if err := ensureStream(ctx, js, work, keepQueue); err != nil {
		return err
	}
	if err := ensureConsumers(ctx, js, cfg, p); err != nil {
		return err
	}
	results := jetstream.StreamConfig{
		Name:        ResultsPartitionStreamName(job, p),
		Description: fmt.Sprintf("cluster-serving results of job %s, partition %d of %d", job, p, cfg.Partitions),
		Subjects:    []string{ResultsPartitionSubject(job, p, ResultsSubject(job, ">"))},
		Retention:   jetstream.LimitsPolicy,
		Storage:     cfg.Storage,
		Replicas:    cfg.Replicas,
		MaxAge:      cfg.ResultTTL,
		Duplicates:  min(DuplicateWindow, cfg.ResultTTL),
	}
	return ensureStream(ctx, js, results, false)
}

// ensureConsumers ensures partition p's workers consumer, and one for
// each priority level but the default (LevelConsumer) when cfg has
// levels. Levels a config no longer has keep their consumers: a record
// may still wait there, and a worker consumes every level it finds
// (Worker.levels).
func ensureConsumers(ctx context.Context, js jetstream.JetStream, cfg StreamConfig, p int) error {
	job := cfg.Job
	for k := 0; k <= cfg.Levels; k++ {
		if k > 0 && k == cfg.DefaultLevel {
			continue
		}
		cons := jetstream.ConsumerConfig{
			Durable:       WorkersConsumer,
			Description:   "cluster-serving workers of job " + job,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       cfg.AckWait,
			MaxDeliver:    cfg.MaxDeliver + 1,
			MaxAckPending: cfg.MaxAckPending,
			FilterSubject: PartitionSubject(job, p),
		}
		if k > 0 {
			cons.Durable, cons.FilterSubject = LevelConsumer(k), levelSubject(cons.FilterSubject, k)
			cons.Description += fmt.Sprintf(", priority level %d", k)
		}
		name := PartitionStreamName(job, p)
		if c, err := js.Consumer(ctx, name, cons.Durable); err == nil && sameConsumer(c.CachedInfo().Config, cons) {
			continue // up to date: leave it alone (see ensureStream)
		}
		if _, err := js.CreateOrUpdateConsumer(ctx, name, cons); err != nil {
			return fmt.Errorf("mesh: ensure consumer %s/%s: %w", name, cons.Durable, err)
		}
	}
	return nil
}

// share is one partition's part of a limit of n partitions: the limit
// divided, rounded up; -1 (no limit) stays.
func share(limit int64, n int) int64 {
	if limit <= 0 {
		return limit
	}
	return (limit + int64(n) - 1) / int64(n)
}

// ensureStream creates cfg's stream, or updates it when its settings
// differ. A stream that is already as wanted is left alone: every process
// calls EnsureStreams at start, and needless updates of a live stream
// race with its consumers inside nats-server's file store.
//
// A stream that cannot be read (an API timeout on a busy server) is not
// updated blindly either: the error goes back to EnsureStreams, which
// retries it. Such an update raced a consumer create in nats-server's
// file store (go test -race, CI).
//
// keepQueue keeps the stream's per-subject limit (StreamConfig.MaxQueue
// 0: an ensure that knows no model config).
func ensureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig, keepQueue bool) error {
	st, err := js.Stream(ctx, cfg.Name)
	if err == nil && keepQueue {
		have := st.CachedInfo().Config
		cfg.MaxMsgsPerSubject, cfg.DiscardNewPerSubject = have.MaxMsgsPerSubject, have.DiscardNewPerSubject
	}
	if err == nil && st.CachedInfo().Config.Retention == jetstream.WorkQueuePolicy {
		// A work partition an older version made. nats-server cannot
		// change a stream's retention to or from work queue, and a
		// work-queue stream works the same, only slower (see purge.go):
		// keep it. Deleting the job's streams while nothing is queued
		// gives the new kind.
		cfg.Retention = jetstream.WorkQueuePolicy
	}
	switch {
	case err == nil && sameStream(st.CachedInfo().Config, cfg):
		return nil
	case err != nil && !errors.Is(err, jetstream.ErrStreamNotFound):
		return fmt.Errorf("mesh: read stream %s: %w", cfg.Name, err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("mesh: ensure stream %s: %w", cfg.Name, err)
	}
	return nil
}

// sameStream reports whether have, a stream's config as the server tells
// it, is want. The server writes "no limit" as -1 where a config leaves 0:
// both are the same, else every process start would update the results
// streams (and nats-server races an update against a consumer's create).
func sameStream(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) && have.Retention == want.Retention &&
		have.Storage == want.Storage && have.Replicas == want.Replicas && noLimit(have.MaxMsgs) == noLimit(want.MaxMsgs) &&
		noLimit(have.MaxBytes) == noLimit(want.MaxBytes) && have.Discard == want.Discard && have.Duplicates == want.Duplicates &&
		have.MaxAge == want.MaxAge && noLimit(have.MaxMsgsPerSubject) == noLimit(want.MaxMsgsPerSubject) &&
		have.DiscardNewPerSubject == want.DiscardNewPerSubject
}

// noLimit reads a stream limit: 0 and -1 both mean none (-1).
func noLimit(v int64) int64 {
	if v <= 0 {
		return -1
	}
	return v
}

func sameConsumer(have, want jetstream.ConsumerConfig) bool {
	return have.AckPolicy == want.AckPolicy && have.AckWait == want.AckWait && have.MaxDeliver == want.MaxDeliver &&
		have.MaxAckPending == want.MaxAckPending && have.FilterSubject == want.FilterSubject
}

// WorkersInfo returns the info of job's shared workers consumer, summed
// over the job's partitions and priority levels: what waits (NumPending), what workers hold
// (NumAckPending), redeliveries, waiting pulls. The rest is partition
// 0's. status and the queue-depth gauges both read the queue through it.
// A partition whose leader is being elected is left out of the sum; it
// returns an error only when no partition answers.
func WorkersInfo(ctx context.Context, js jetstream.JetStream, job string) (*jetstream.ConsumerInfo, error) {
	n, err := Partitions(ctx, js, job)
	if err != nil {
		return nil, err
	}
	var sum *jetstream.ConsumerInfo
	var first error
	for p := range n {
		info, err := partitionInfo(ctx, js, job, p)
		if err != nil {
			first = cmp.Or(first, err)
			continue
		}
		if sum == nil {
			sum = info
			continue
		}
		sum.NumPending += info.NumPending
		sum.NumAckPending += info.NumAckPending
		sum.NumRedelivered += info.NumRedelivered
		sum.NumWaiting += info.NumWaiting
	}
	if sum == nil {
		return nil, first
	}
	return sum, nil
}

// partitionInfo is the info of partition p's workers consumer, with the
// counts of its priority levels' consumers (schedule.go) added: one
// listing of the partition's consumers.
func partitionInfo(ctx context.Context, js jetstream.JetStream, job string, p int) (*jetstream.ConsumerInfo, error) {
	name := PartitionStreamName(job, p)
	st, err := js.Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("mesh: consumer %s/%s: %w", name, WorkersConsumer, err)
	}
	var base *jetstream.ConsumerInfo
	var levels jetstream.ConsumerInfo
	infos := st.ListConsumers(ctx)
	for c := range infos.Info() {
		switch {
		case c.Name == WorkersConsumer:
			base = c
		case strings.HasPrefix(c.Name, WorkersConsumer+"-p"):
			levels.NumPending += c.NumPending
			levels.NumAckPending += c.NumAckPending
			levels.NumRedelivered += c.NumRedelivered
			levels.NumWaiting += c.NumWaiting
		}
	}
	if err := infos.Err(); err != nil {
		return nil, fmt.Errorf("mesh: consumers of %s: %w", name, err)
	}
	if base == nil {
		return nil, fmt.Errorf("mesh: consumer %s/%s: %w", name, WorkersConsumer, jetstream.ErrConsumerNotFound)
	}
	base.NumPending += levels.NumPending
	base.NumAckPending += levels.NumAckPending
	base.NumRedelivered += levels.NumRedelivered
	base.NumWaiting += levels.NumWaiting
	return base, nil
}
