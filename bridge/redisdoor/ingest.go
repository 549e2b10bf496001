package redisdoor

import (
	"context"
	"errors"
	"log/slog"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// ingest owns the stream side: group, reclaim, read, hand over, ack.
func (d *Door) ingest(ctx context.Context) error {
	// Until the group exists nothing can be read; Redis may still be starting.
	for !d.try(ctx, "create group", d.ensureGroup) {
		if ctx.Err() != nil {
			return nil
		}
	}
	d.log.Info("serving redis stream", "addr", d.rdb.Options().Addr, "stream", d.cfg.Job, "group", Group, "consumer", d.cfg.Consumer)
	// Entries a previous run read but did not ack.
	for !d.try(ctx, "reclaim pending entries", d.reclaim) {
		if ctx.Err() != nil {
			return nil
		}
	}
	var lastScan time.Time
	scanEvery := d.cfg.Rescan
	stuck := false
	for ctx.Err() == nil {
		if stuck {
			// Too many entries could not be handed over (NATS away, the
			// work queue full): retry those before reading more, so that
			// an outage holds a few blocks pending, not the stream.
			stuck = d.retryStuck(ctx)
			continue
		}
		if time.Since(lastScan) >= scanEvery {
			scanEvery, lastScan = d.rescan(ctx, scanEvery), time.Now()
		}
		msgs, ok := d.read(ctx)
		if ok && len(msgs) > 0 && d.serve(ctx, msgs, false).left > 0 {
			stuck = d.heldTooMany(ctx)
		}
	}
	return nil
}

// maxRescan bounds how rarely an entry that keeps failing is retried.
const maxRescan = time.Minute

// rescan serves again this door's own pending entries and the entries the
// group skipped, and returns how long to wait before the next rescan,
// given the last wait.
func (d *Door) rescan(ctx context.Context, last time.Duration) time.Duration {
	h, err := d.retryOwnPending(ctx)
	if err == nil {
		err = d.serveSkipped(ctx)
	}
	switch {
	case err != nil:
		if ctx.Err() == nil {
			d.lim.Log(ctx, slog.LevelWarn, "serving pending and skipped entries; retrying", err)
		}
		return d.cfg.RetryInterval
	case h.stuck():
		// An entry that keeps failing while others pass is retried less
		// and less often, so that its Timeout per try does not slow the
		// stream down.
		return min(2*max(last, d.cfg.Rescan), maxRescan)
	}
	return d.cfg.Rescan
}

// heldTooMany reports whether this door's consumer holds two blocks or
// more pending: then it retries them before it reads more.
func (d *Door) heldTooMany(ctx context.Context) bool {
	p, err := d.rdb.XPending(ctx, d.cfg.Job, Group).Result()
	return err == nil && p.Consumers[d.cfg.Consumer] >= int64(2*d.cfg.Batch)
}

// retryStuck serves this door's own pending entries again and reports
// whether it still holds too many of them.
func (d *Door) retryStuck(ctx context.Context) bool {
	h, err := d.retryOwnPending(ctx)
	if err != nil {
		d.lim.Log(ctx, slog.LevelWarn, "retry own pending entries; retrying", err)
	}
	if err != nil || h.stuck() {
		d.sleep(ctx, d.cfg.RetryInterval)
	}
	return d.heldTooMany(ctx)
}

// read reads the next block of new entries; ok is false after an error,
// which it handled (logged, waited, group created again).
func (d *Door) read(ctx context.Context) (msgs []goredis.XMessage, ok bool) {
	res, err := d.rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{
		Group:    Group,
		Consumer: d.cfg.Consumer,
		Streams:  []string{d.cfg.Job, ">"},
		Count:    int64(d.cfg.Batch),
		Block:    d.cfg.Block,
	}).Result()
	switch {
	case errors.Is(err, goredis.Nil):
		return nil, true
	case err != nil:
		if ctx.Err() != nil {
			return nil, false
		}
		if goredis.HasErrorPrefix(err, errNoGroup) {
			// The stream (and its group) was deleted: create it again.
			d.try(ctx, "create group", d.ensureGroup)
			return nil, false
		}
		d.lim.Log(ctx, slog.LevelWarn, "XREADGROUP; retrying", err)
		d.sleep(ctx, d.cfg.RetryInterval)
		return nil, false
	}
	for _, s := range res {
		msgs = append(msgs, s.Messages...)
	}
	return msgs, true
}
