package mesh

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// kvOperationHeader marks a key-value delete (jetstream's kv.Delete).
const kvOperationHeader = "KV-Operation"

// headerResultID is on a delete marker of a ResultBucket: the message id
// (Nats-Msg-Id) of the result it deletes.
const headerResultID = "Cs-Result-Id"

// Put keeps value under uri. msgID, the id of the record the result
// answers, makes a result delivered again after the client read and
// deleted it not come back (see PutAsync). It returns ErrBucketURI or
// the publish error.
func (b *ResultBucket) Put(ctx context.Context, uri string, value []byte, msgID string) error {
	f, err := b.PutAsync(uri, value, msgID)
	if err != nil {
		return err
	}
	return f(ctx)
}

// PutAsync starts a Put and returns the wait for its acknowledgement, so
// that a batch of puts takes one round trip. Put and PutAsync keep value
// (Get may answer with it): the caller must not change it afterwards.
//
// A result put again with its msgID after the client read and deleted
// it (a worker's batch run again, a results consumer replaying) does
// nothing. The bucket's stream drops such a put within its duplicate
// window, but a NATS server rebuilds that window at a restart (or a new
// leader) from the messages it still stores only, and the delete marker
// replaced the put (History 1). So the marker names the result it
// deletes (headerResultID), the index keeps it (Watch reads the markers
// of the bucket, at start too) and drops the put, and a put of a key
// whose marker the index does not know is made on the condition that
// the key has no entry the index does not know of (putGuard): the
// stream refuses it over such a marker, and putChecked reads whose it is.
//
// A put that fails, or is not acknowledged within offerAfter (the
// bucket's stream electing a leader takes seconds), still lists the
// result in this process's index while Watch serves it: clients polling
// this process read it from memory meanwhile, as the Redis door's
// results ride over an election, and the caller puts it again later (a
// result durable in JetStream until then). A slow put so listed returns
// an error wrapping errPutSlow at once, so that the caller's next
// results are not held up behind it.
func (b *ResultBucket) PutAsync(uri string, value []byte, msgID string) (wait func(context.Context) error, err error) {
	key, err := BucketKey(uri)
	if err != nil {
		return nil, err
	}
	expect, served := b.putGuard(key, msgID)
	if served {
		// The client read and deleted this result: no put brings it back.
		return func(context.Context) error { return nil }, nil
	}
	f, err := b.js.PublishMsgAsync(b.putMsg(key, value, msgID, expect))
	if err != nil {
		b.offer(key, value, msgID)
		return nil, fmt.Errorf("mesh: put result: %w", err)
	}
	return func(ctx context.Context) error { return b.awaitPut(ctx, f, key, value, msgID) }, nil
}

// awaitPut waits for the acknowledgement f of the put of value under key.
func (b *ResultBucket) awaitPut(ctx context.Context, f jetstream.PubAckFuture, key string, value []byte, msgID string) error {
	slow := time.NewTimer(offerAfter)
	defer slow.Stop()
	for {
		select {
		case ack := <-f.Ok():
			// A duplicate (a put again after its acknowledgement was
			// lost) carries the first put's revision: the index learns
			// its value, or keeps the tombstone of its delete.
			b.note(key, ack.Sequence, true, value, msgID)
			return nil
		case <-slow.C:
			if b.offer(key, value, msgID) {
				// Served from memory: the caller puts it again later
				// instead of holding its next results meanwhile.
				return fmt.Errorf("mesh: put result: %w", errPutSlow)
			}
		case err := <-f.Err():
			if wrongLastSeq(err) {
				return b.putChecked(ctx, key, value, msgID)
			}
			b.offer(key, value, msgID)
			return fmt.Errorf("mesh: put result: %w", err)
		case <-ctx.Done():
			b.offer(key, value, msgID)
			return fmt.Errorf("mesh: put result: %w", ctx.Err())
		}
	}
}

// noGuard is putGuard's expect for a put made as it is.
const noGuard = -1

// putGuard says how the put of result msgID under key is made: not at
// all (served) when the index has a delete of this very result; else on
// the condition that key's last entry is the revision the index knows
// (expect; 0, none, for a key it knows nothing of). A put without a
// msgID, or of a key whose put or delete this process has not got
// stored yet, is made as it is (noGuard).
func (b *ResultBucket) putGuard(key, msgID string) (expect int64, served bool) {
	if msgID == "" {
		return noGuard, false
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	st, ok := b.keys[key]
	switch {
	case !ok:
		return 0, false
	case st.gone && st.msgID == msgID:
		return 0, true
	case st.unstored || st.rev == pendingRev:
		return noGuard, false
	}
	return int64(st.rev), false
}

// putMsg is the put of value under key, on the condition expect (see
// putGuard).
func (b *ResultBucket) putMsg(key string, value []byte, msgID string, expect int64) *nats.Msg {
	m := nats.NewMsg(b.subject + key)
	m.Data = value
	if msgID != "" {
		m.Header.Set(jetstream.MsgIDHeader, msgID)
	}
	if expect != noGuard {
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatInt(expect, 10))
	}
	return m
}

// putChecked puts value under key after the stream refused the put on
// its condition: key's last entry is one the index did not know (a new
// process, a tombstone forgotten, another process's put or marker not
// seen yet). A delete of this very result, or this result put already,
// is left as it is; over anything else the put is made as it is.
func (b *ResultBucket) putChecked(ctx context.Context, key string, value []byte, msgID string) error {
	m, err := b.last(ctx, key)
	if err != nil {
		b.offer(key, value, msgID)
		return fmt.Errorf("mesh: put result: %w", err)
	}
	if m != nil {
		if put, id := entryOf(m.Header); id == msgID {
			if !put {
				value = nil
			}
			b.note(key, m.Sequence, put, value, id)
			return nil
		}
	}
	ack, err := b.js.PublishMsg(ctx, b.putMsg(key, value, msgID, noGuard))
	if err != nil {
		b.offer(key, value, msgID)
		return fmt.Errorf("mesh: put result: %w", err)
	}
	b.note(key, ack.Sequence, true, value, msgID)
	return nil
}

// wrongLastSeq reports whether err is the stream's refusal of a put on
// its condition (a replicated stream's code differs).
func wrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// entryOf reads a message of the bucket's stream: a put, with the
// message id of its result; or a marker (a delete, with the id of the
// result it deletes when it names one; a purge; an expiry).
func entryOf(h nats.Header) (put bool, msgID string) {
	if h.Get(kvOperationHeader) != "" || h.Get(jetstream.MarkerReasonHeader) != "" {
		return false, h.Get(headerResultID)
	}
	return true, h.Get(jetstream.MsgIDHeader)
}
