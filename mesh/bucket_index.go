package mesh

import (
	"math"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// keyState is what a ResultBucket's index knows of a key: the revision
// that last put or deleted it and, for a put this process has the value
// of (it put it, or read it), that value when small.
type keyState struct {
	rev   uint64
	value []byte
	// gone marks a deleted key (a tombstone), kept so that an older put
	// learnt late (a watcher's event, a put's acknowledgement) does not
	// bring back a result a client read and deleted.
	gone bool
	// unstored marks a result this process serves from memory while its
	// put is not acknowledged (rev 0).
	unstored bool
	// msgID is the message id of the result put, or of the result a
	// tombstone's marker deleted: a put of that result again does
	// nothing (putGuard).
	msgID string
}

// offerAfter is how long a put waits for its acknowledgement before the
// index serves its value from memory.
const offerAfter = 500 * time.Millisecond

// pendingRev is the revision of a tombstone whose delete marker is not
// stored yet: newer than anything, so nothing brings the key back.
const pendingRev = math.MaxUint64

// Bounds of the tombstones an index keeps. A put acknowledged late (a
// batch put again after its acknowledgement was lost comes back as a
// duplicate of the first, with the first's revision) arrives within the
// bucket's duplicate window, DuplicateWindow at most. A put again of a
// result whose tombstone is forgotten meets its marker in the stream
// (putGuard), as long as the bucket keeps that.
const (
	tombstoneTTL  = DuplicateWindow
	maxTombstones = 1 << 20
)

// tombstone is a landed delete in the order they were made, for pruning.
type tombstone struct {
	key string
	rev uint64
	at  time.Time
}

// A pending delete is a marker this process must still get stored; the
// key is hidden meanwhile. Watch publishes it again until it lands.
type pendingDelete struct {
	ack  jetstream.PubAckFuture // nil before the first publish, or after a failed one
	sent time.Time
	// held: not published before its commit (DeleteLater), which shows
	// prev again when the client did not get the value.
	held bool
	prev keyState
	// msgID is the deleted result's, named by the marker.
	msgID string
}

// markerRetry is how long a delete marker's acknowledgement is awaited
// before it is published again, markerPause how long after a failed
// publish; deleteSettleEvery how often Watch looks.
const (
	markerRetry       = 2 * time.Second
	markerPause       = 250 * time.Millisecond
	deleteSettleEvery = 50 * time.Millisecond
)

// BucketChange is a change of a result that ResultBucket.OnChange
// reports.
type BucketChange uint8

const (
	// BucketPut: a result was stored under the uri, newer than the one the
	// index knew (a put again of the same result is not reported twice).
	BucketPut BucketChange = iota + 1
	// BucketDelete: the uri's result was deleted (or purged).
	BucketDelete
	// BucketExpire: the uri's result aged out (the bucket's TTL). Seen from
	// the expiry markers of a NATS server of 2.11 or later only.
	BucketExpire
)

// OnChange makes fn hear of the bucket's results stored, deleted and
// expired, by this process or any other, once each, as the index learns
// them: this process's puts once acknowledged (or served from memory,
// see PutAsync) and its deletes at their commit, others' from Watch.
// When fn runs, Get already answers the change. The changes Watch learns
// before it first read the whole bucket (the results there before) are
// not reported. fn runs on the goroutine that learnt the change (Watch's
// consumer, a put's wait, a Delete) with no lock held, so it must return
// at once: hand the change off, never block. nil, the default, stops it;
// then a change costs one atomic load. Safe for concurrent use.
func (b *ResultBucket) OnChange(fn func(uri string, c BucketChange)) {
	if fn == nil {
		b.onChange.Store(nil)
		return
	}
	b.onChange.Store(&fn)
}

// changed reports change c of key to OnChange's fn; 0 is no change.
func (b *ResultBucket) changed(key string, c BucketChange) {
	if c == 0 {
		return
	}
	fn := b.onChange.Load()
	if fn == nil {
		return
	}
	if uri, err := URIOfBucketKey(key); err == nil {
		(*fn)(uri, c)
	}
}

// note records that revision rev put (present, with value when this
// process has it) or deleted key, unless the index knows a newer change.
// msgID is the put's message id, or the one of the result the delete
// marker names. The same put learnt twice (the watcher's event, then the
// put's acknowledgement) keeps the value the second one brings. It is
// for this process's own puts and deletes: each is reported to OnChange.
func (b *ResultBucket) note(key string, rev uint64, present bool, value []byte, msgID string) {
	b.mu.Lock()
	c := b.noteLocked(key, rev, present, value, msgID, BucketDelete)
	b.mu.Unlock()
	b.changed(key, c)
}

// learnt is note of a message of the bucket's stream this process read
// (Watch, a read of the leader) rather than made: h are its headers and
// value its data. It returns what entryOf says of it. Its change is
// reported once the index was first ready: before, Watch learns the
// results already there.
func (b *ResultBucket) learnt(key string, rev uint64, h nats.Header, value []byte) (put bool, msgID string) {
	put, msgID = entryOf(h)
	gone := BucketDelete
	if !put {
		value = nil
		if h.Get(jetstream.MarkerReasonHeader) == "MaxAge" {
			gone = BucketExpire
		}
	}
	b.mu.Lock()
	c := b.noteLocked(key, rev, put, value, msgID, gone)
	if !b.primed {
		c = 0
	}
	b.mu.Unlock()
	b.changed(key, c)
	return put, msgID
}

// noteLocked is note with mu held; it returns the change to report
// (gone for a delete), 0 for none.
func (b *ResultBucket) noteLocked(key string, rev uint64, present bool, value []byte, msgID string, gone BucketChange) BucketChange {
	cur, ok := b.keys[key]
	switch {
	case ok && rev < cur.rev:
		return 0
	case ok && rev == cur.rev:
		if present && !cur.gone && cur.value == nil {
			b.keep(key, cur, value)
		}
		return 0
	}
	b.cached -= len(cur.value)
	if !present {
		b.bury(key, rev, msgID, time.Now())
		if ok && !cur.gone {
			return gone
		}
		return 0
	}
	st, c := keyState{rev: rev, msgID: msgID}, BucketPut
	if cur.unstored && (msgID == "" || msgID == cur.msgID) {
		// The put of a result this process serves from memory (its
		// acknowledgement was lost or late, or the watcher's event):
		// reported already when offered.
		c = 0
		if value == nil {
			// The watcher's event: the value stays, and the client's HGET
			// needs no read.
			value, st.msgID = cur.value, cur.msgID
		}
	}
	b.keep(key, st, value)
	return c
}

// offer lists key with value, which this process could not get stored
// yet (a failed or slow put of msgID), unless the index knows a stored
// result of key, a delete of this very result, or a delete not stored
// yet; or value is past the cache's bounds, or the index does not serve.
// It reports whether the index serves this value from memory now, or
// served it and saw it deleted.
func (b *ResultBucket) offer(key string, value []byte, msgID string) bool {
	served, c := b.offerLocked(key, value, msgID)
	b.changed(key, c)
	return served
}

// offerLocked is offer, taking mu; it also returns the change to report.
func (b *ResultBucket) offerLocked(key string, value []byte, msgID string) (bool, BucketChange) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur, ok := b.keys[key]
	switch {
	case ok && !cur.gone && cur.unstored && cur.msgID == msgID:
		return true, 0
	case !b.ready, len(value) > maxCachedValue, b.cached-len(cur.value)+len(value) > maxCachedBytes:
		return false, 0
	case ok && !cur.gone && !cur.unstored:
		return false, 0
	case ok && cur.gone && msgID != "" && cur.msgID == msgID:
		return true, 0 // served, read and deleted already
	case ok && cur.gone && cur.rev == pendingRev:
		return false, 0
	}
	b.cached += len(value) - len(cur.value)
	b.keys[key] = keyState{value: value, unstored: true, msgID: msgID}
	return true, BucketPut
}

// keep stores st under key with value when the cache bounds allow it.
// Call it with mu held and st's old value already uncounted.
func (b *ResultBucket) keep(key string, st keyState, value []byte) {
	if value != nil && len(value) <= maxCachedValue && b.cached+len(value) <= maxCachedBytes {
		st.value = value
		b.cached += len(value)
	}
	b.keys[key] = st
}

// bury makes key a tombstone of revision rev and forgets the tombstones
// past their time or count. Call it with mu held and key's old value
// already uncounted.
func (b *ResultBucket) bury(key string, rev uint64, msgID string, now time.Time) {
	b.keys[key] = keyState{rev: rev, gone: true, msgID: msgID}
	b.tombs = append(b.tombs, tombstone{key: key, rev: rev, at: now})
	n := 0
	for n < len(b.tombs) && (len(b.tombs)-n > maxTombstones || now.Sub(b.tombs[n].at) > tombstoneTTL) {
		t := b.tombs[n]
		if st, ok := b.keys[t.key]; ok && st.gone && st.rev == t.rev {
			delete(b.keys, t.key)
		}
		n++
	}
	if n > 0 {
		b.tombs = slices.Delete(b.tombs, 0, n)
	}
}

// hold makes key a pending tombstone, held (its marker not published)
// until commit, and returns its pending delete; nil (nothing done) while
// the index does not serve: then no Watch runs to store the marker.
func (b *ResultBucket) hold(key string) *pendingDelete {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.ready {
		return nil
	}
	cur := b.keys[key]
	p := &pendingDelete{sent: time.Now(), held: true, prev: cur, msgID: cur.msgID}
	b.cached -= len(cur.value)
	b.keys[key] = keyState{rev: pendingRev, gone: true, msgID: cur.msgID}
	b.pending[key] = p
	return p
}

// commit ends the hold of the pending delete p of key: sent, it publishes
// its marker at once (a door killed right after the DEL answered has
// most likely sent it), without waiting for its acknowledgement: a
// client pipelines HGET and DEL for every key KEYS listed, and a DEL
// that waited for a stream electing a leader held the whole pipeline
// past the client's read timeout, losing the values it had read.
// settleDeletes learns the marker's revision, or publishes it again.
// Not sent, it shows key as it was before the delete.
func (b *ResultBucket) commit(key string, p *pendingDelete, sent bool) {
	b.mu.Lock()
	if b.pending[key] != p || !p.held {
		b.mu.Unlock()
		return
	}
	p.held = false
	if !sent {
		delete(b.pending, key)
		if st := b.keys[key]; st.gone && st.rev == pendingRev {
			b.keys[key] = p.prev
			b.cached += len(p.prev.value)
		}
		b.mu.Unlock()
		return
	}
	p.sent = time.Now()
	b.mu.Unlock()
	b.changed(key, BucketDelete)
	f, err := b.js.PublishMsgAsync(b.marker(key, p.msgID))
	if err != nil {
		return // settleDeletes publishes it again
	}
	b.mu.Lock()
	if b.pending[key] == p {
		p.ack = f
	}
	b.mu.Unlock()
}

// landed makes the pending delete p of key, whose marker the bucket
// stored at revision rev, a tombstone. Call it with mu held.
func (b *ResultBucket) landed(key string, p *pendingDelete, rev uint64, now time.Time) {
	if b.pending[key] != p {
		return
	}
	delete(b.pending, key)
	if st := b.keys[key]; st.gone && st.rev == pendingRev {
		b.bury(key, rev, st.msgID, now)
	}
}

// settleDeletes turns the pending deletes whose marker landed into
// tombstones of the marker's revision, and publishes again the markers
// that failed, were never sent or are unanswered past markerRetry.
func (b *ResultBucket) settleDeletes() {
	now := time.Now()
	resend := map[string]*pendingDelete{}
	b.mu.Lock()
	for key, p := range b.pending {
		if p.held {
			continue // its commit publishes it
		}
		if p.ack == nil {
			if now.Sub(p.sent) > markerPause {
				resend[key] = p
			}
			continue
		}
		select {
		case ack := <-p.ack.Ok():
			b.landed(key, p, ack.Sequence, now)
		case <-p.ack.Err():
			p.ack = nil // sent again after markerPause, not at every round
		default:
			if now.Sub(p.sent) > markerRetry {
				resend[key] = p
			}
		}
	}
	b.mu.Unlock()
	for key, p := range resend {
		f, err := b.js.PublishMsgAsync(b.marker(key, p.msgID))
		if err != nil {
			f = nil // tried again on the next round
		}
		b.mu.Lock()
		if b.pending[key] == p {
			p.ack, p.sent = f, now
		}
		b.mu.Unlock()
	}
}

// marker is the delete marker of key (kv.Delete's), naming the result
// msgID it deletes when known: it outlives the put it replaced, and with
// it the stream's memory of the put's id (see PutAsync).
func (b *ResultBucket) marker(key, msgID string) *nats.Msg {
	m := nats.NewMsg(b.subject + key)
	m.Header.Set(kvOperationHeader, "DEL")
	if msgID != "" {
		m.Header.Set(headerResultID, msgID)
	}
	return m
}

// indexed returns the keys the index has a result of, sorted, and
// whether it serves.
func (b *ResultBucket) indexed() ([]string, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if !b.ready {
		return nil, false
	}
	var out []string
	for k, st := range b.keys {
		if !st.gone {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, true
}

// hidden reports whether the index hides key: a delete of this process
// whose marker is not stored yet.
func (b *ResultBucket) hidden(key string) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	st := b.keys[key]
	return st.gone && st.rev == pendingRev
}

// lookup is what the index knows of key (ok: it has an entry) and
// whether the index serves.
func (b *ResultBucket) lookup(key string) (st keyState, ok, ready bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	st, ok = b.keys[key]
	return st, ok, b.ready
}

// maybe reports whether key may have a result: false when the index
// serves and has none, or hides it.
func (b *ResultBucket) maybe(key string) bool {
	st, ok, ready := b.lookup(key)
	return !(st.gone && st.rev == pendingRev) && (!ready || ok && !st.gone)
}
