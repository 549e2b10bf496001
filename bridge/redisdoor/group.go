package redisdoor

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
)

// ensureGroup creates the stream and its group from the first entry; a
// group that exists already is left as it is.
func (d *Door) ensureGroup(ctx context.Context) error {
	// Look first: XGROUP CREATE is refused while Redis is out of memory,
	// even for a group that exists, and a full Redis is when the door must
	// keep consuming.
	if groups, err := d.rdb.XInfoGroups(ctx, d.cfg.Job).Result(); err == nil {
		for _, g := range groups {
			if g.Name == Group {
				return nil
			}
		}
	}
	err := d.rdb.XGroupCreateMkStream(ctx, d.cfg.Job, Group, "0").Err()
	if err != nil && !goredis.HasErrorPrefix(err, errBusyGroup) {
		return fmt.Errorf("XGROUP CREATE %s %s: %w", d.cfg.Job, Group, err)
	}
	return nil
}

// reclaim takes over and serves every pending entry of the group: the
// ones a killed run of this door (or of a door that ran elsewhere) read
// but never acked.
func (d *Door) reclaim(ctx context.Context) error {
	start := "0-0"
	for ctx.Err() == nil {
		msgs, next, err := d.rdb.XAutoClaim(ctx, &goredis.XAutoClaimArgs{
			Stream: d.cfg.Job, Group: Group, Consumer: d.cfg.Consumer,
			MinIdle: 0, Start: start, Count: int64(d.cfg.Batch),
		}).Result()
		if err != nil {
			return fmt.Errorf("XAUTOCLAIM: %w", err)
		}
		if len(msgs) > 0 {
			d.log.Info("serving entries left pending by an earlier run", "entries", len(msgs))
			d.serve(ctx, msgs, false)
		}
		if next == "0-0" || next == "" {
			return nil
		}
		start = next
	}
	return nil
}

// retryOwnPending serves again the entries pending for this door's own
// consumer: ones whose hand-over failed for a transient reason, whose XACK
// failed (Redis briefly away) or whose NaN could not be written. ingest
// hands entries over one block at a time, so between blocks none of them
// is in flight. Entries deleted meanwhile come back without fields and are
// only acked.
func (d *Door) retryOwnPending(ctx context.Context) (handover, error) {
	var h handover
	res, err := d.rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{
		Group: Group, Consumer: d.cfg.Consumer,
		Streams: []string{d.cfg.Job, "0"}, Count: int64(d.cfg.Batch),
	}).Result()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return h, fmt.Errorf("XREADGROUP pending: %w", err)
	}
	for _, s := range res {
		if len(s.Messages) > 0 {
			h = d.serve(ctx, s.Messages, false)
		}
	}
	return h, nil
}

// serveSkipped serves the entries at or below the group's last-delivered
// id that are not pending. The door deletes every entry it handled, so
// those are entries the group never delivered: a client created the group
// with $ after they were added. Their message ids make a second hand-over
// of an entry harmless.
func (d *Door) serveSkipped(ctx context.Context) error {
	groups, err := d.rdb.XInfoGroups(ctx, d.cfg.Job).Result()
	if err != nil {
		if goredis.HasErrorPrefix(err, errNoSuchKey) {
			return d.ensureGroup(ctx)
		}
		return fmt.Errorf("XINFO GROUPS: %w", err)
	}
	last := ""
	for _, g := range groups {
		if g.Name == Group {
			last = g.LastDeliveredID
		}
	}
	if last == "" || last == "0-0" {
		return nil
	}
	start := "-"
	for ctx.Err() == nil {
		msgs, err := d.rdb.XRangeN(ctx, d.cfg.Job, start, last, int64(d.cfg.Batch)).Result()
		if err != nil {
			return fmt.Errorf("XRANGE: %w", err)
		}
		if len(msgs) == 0 {
			return nil
		}
		pend, err := d.rdb.XPendingExt(ctx, &goredis.XPendingExtArgs{
			Stream: d.cfg.Job, Group: Group,
			Start: msgs[0].ID, End: msgs[len(msgs)-1].ID, Count: int64(len(msgs)),
		}).Result()
		if err != nil {
			return fmt.Errorf("XPENDING: %w", err)
		}
		pending := make(map[string]bool, len(pend))
		for _, p := range pend {
			pending[p.ID] = true
		}
		skipped := msgs[:0:0]
		for _, m := range msgs {
			if !pending[m.ID] {
				skipped = append(skipped, m)
			}
		}
		if len(skipped) > 0 {
			d.log.Info("serving entries the consumer group skipped", "entries", len(skipped))
			d.serve(ctx, skipped, true)
		}
		if len(msgs) < d.cfg.Batch {
			return nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
	return nil
}
