package mesh

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/infer/status"
)

// Coalescing: the requests that reach a Client for one job while its
// stores are on their way to JetStream go into one stored work message
// (a batch) that a worker splits, runs and answers one by one. A store
// costs nats-server about as much for one request as for fifty, and the
// one-message-per-request ceiling of a single server (~46k req/s on 16
// cores, issue 23) is what a tiny model hits first.
//
// It is adaptive, with no timer: a request that finds fewer than
// coalesceStores stores in flight for its job is stored at once, alone,
// as before; only requests that arrive while those are in flight wait,
// and they go together as soon as one returns (or at once when they
// reach Coalesce requests or coalesceBytes). A lone request never waits;
// under load a batch gathers for about one store's round trip.
//
// Each request keeps its own headers in the batch: reply subject,
// deadline, trace context, uri, a durable record's Nats-Msg-Id. Requests
// with a caller's Nats-Msg-Id are never coalesced (JetStream's dedupe of
// that id needs a message of their own). Durable records (Enqueue) are,
// in batches of their own: a record stored twice is answered once all
// the same, by its results' Nats-Msg-Id (the results stream's dedupe and
// the doors' written markers), so it needs no message of its own; with
// the file store syncing every write, a message per record capped the
// Redis and RESP doors at about one record per fsync (issue 35).

const (
	// HeaderBatch marks a batch work message: the number of requests in it.
	HeaderBatch = "Cs-Batch"
	// HeaderBatchCallers is on a batch of NATS callers' requests: the
	// door pins its publish as it pins a caller's (see router.publish).
	HeaderBatchCallers = "Cs-Batch-Callers"
	// HeaderAttempts is on a request a worker took out of a batch and
	// stored again alone (its batch was answered but for it): the
	// deliveries it had already had, so that MaxDeliver still bounds it.
	HeaderAttempts = "Cs-Attempts"
	// BatchContentType is the Cs-Content-Type of a batch work message.
	BatchContentType = "application/vnd.cluster-serving.batch"
	// DefaultCoalesce is ClientConfig.Coalesce's default.
	DefaultCoalesce = 64
	// coalesceStores is how many stores of one job a Client keeps in
	// flight before requests wait to be coalesced. One: with the store
	// fsyncing every write (natsSync always), a second store in flight
	// halves the batches and doubles the fsyncs (bench -only sync, 2
	// cores, 32 callers: 8,289 → 9,203 req/s with always; always ÷ 2m
	// 0.499 → 0.649).
	coalesceStores = 1
	// coalesceBytes bounds a batch's body (see batchBytes); a bigger
	// request goes alone.
	coalesceBytes = 256 << 10
	// batchMagic starts a batch body; the version is its last byte.
	batchMagic = "CSB1"
)

// ErrBadBatch is what decodeBatch returns for a body that is not a batch.
var ErrBadBatch = errors.New("mesh: malformed batch work message")

// coalescer gathers one job's requests into batches for a Client. Safe
// for concurrent use.
type coalescer struct {
	c   *Client
	job string
	max int
	// mode is the reply path of every request in this coalescer. NATS
	// callers' batches (Forward) are pinned to their partition on an
	// unknown fate, as a caller's lone request is; a door's inbox
	// requests (Submit) and durable records (Enqueue) have coalescers of
	// their own and move on (the door drops a second answer, the results
	// their second copy), so that a partition without a leader holds
	// none of them. A durable batch carries no deadline: its records wait
	// as long as they must.
	mode ReplyMode

	mu       sync.Mutex
	waiting  []*coEntry
	size     int
	inflight int // stores in flight, each with a flusher
}

// coEntry is one request waiting in a coalescer.
type coEntry struct {
	m        *nats.Msg
	deadline time.Time
	done     chan coResult // buffered 1
}

type coResult struct {
	st  stored
	err error
}

// coalescerOf returns the coalescer for m, a work message built by begin,
// and m's size in a batch; nil when m is stored alone: coalescing off, a
// caller's id on a request that is no durable record, a priority level,
// or too big.
func (c *Client) coalescerOf(job string, req Request, m *nats.Msg) (*coalescer, int) {
	if c.coalesce < 2 || req.Schedule.Level != 0 {
		return nil, 0
	}
	mode := replyOf(m.Header).Mode
	switch {
	case mode == ReplyDurable:
	case mode != ReplyCaller && mode != ReplyInbox, req.MsgID != "":
		return nil, 0
	}
	size := entrySize(m)
	if size > c.batchBytes() {
		return nil, 0
	}
	return c.coalescerFor(job, mode), size
}

// batchBytes bounds a batch's body: coalesceBytes, or half the server's
// max_payload when that is less, so that no batch of requests that each
// fit is refused as too large.
func (c *Client) batchBytes() int { return batchLimit(c.nc) }

// batchLimit is batchBytes of a connection: the workers' results batches
// (results_batch.go) are bounded alike.
func batchLimit(nc *nats.Conn) int {
	if mp := int(nc.MaxPayload()) / 2; mp > 0 && mp < coalesceBytes {
		return mp
	}
	return coalesceBytes
}

// coalescerKey names a coalescer: a job and a reply path (NATS callers'
// requests, a door's inbox requests, durable records).
type coalescerKey struct {
	job  string
	mode ReplyMode
}

// coalescerFor returns the coalescer of job's requests of reply path
// mode, made on first use.
func (c *Client) coalescerFor(job string, mode ReplyMode) *coalescer {
	k := coalescerKey{job, mode}
	if co, ok := c.coalescers.Load(k); ok {
		return co.(*coalescer)
	}
	co, _ := c.coalescers.LoadOrStore(k, &coalescer{c: c, job: job, max: c.coalesce, mode: mode})
	return co.(*coalescer)
}

// add stores m, of size in a batch, alone or in a batch, and returns
// what its store did. ctx must carry a deadline; it becomes m's bound in
// the batch.
func (co *coalescer) add(ctx context.Context, m *nats.Msg, size int) (stored, error) {
	e := newCoEntry(ctx, m)
	co.mu.Lock()
	batch := co.push(e, size)
	if batch == nil {
		batch = co.startIdle()
	}
	co.mu.Unlock()
	if batch != nil {
		go co.flush(batch)
	}
	r := <-e.done
	return r.st, r.err
}

// addAll is add of several messages of one caller at once (a door's
// block of records), sizes[i] m[i]'s: they queue together, so that a job
// with no store in flight stores them in one batch rather than the first
// alone and the others after it. It returns each one's outcome, in order.
func (co *coalescer) addAll(ctx context.Context, ms []*nats.Msg, sizes []int) []coResult {
	es := make([]*coEntry, len(ms))
	var batches [][]*coEntry
	co.mu.Lock()
	for i, m := range ms {
		es[i] = newCoEntry(ctx, m)
		if b := co.push(es[i], sizes[i]); b != nil {
			batches = append(batches, b)
		}
	}
	if b := co.startIdle(); b != nil {
		batches = append(batches, b)
	}
	co.mu.Unlock()
	for _, b := range batches {
		go co.flush(b)
	}
	out := make([]coResult, len(es))
	for i, e := range es {
		out[i] = <-e.done
	}
	return out
}

// newCoEntry is the entry of m, bound by ctx's deadline.
func newCoEntry(ctx context.Context, m *nats.Msg) *coEntry {
	e := &coEntry{m: m, done: make(chan coResult, 1)}
	var ok bool
	if e.deadline, ok = ctx.Deadline(); !ok {
		e.deadline = time.Now().Add(DefaultSubmitTimeout) // begin bounds every ctx; in case
	}
	return e
}

// push queues e, of size in a batch, and returns the batch to store now
// when the waiting ones reached Coalesce requests or batchBytes (counted
// in flight); co.mu is held.
func (co *coalescer) push(e *coEntry, size int) []*coEntry {
	co.waiting = append(co.waiting, e)
	co.size += size
	if len(co.waiting) < co.max && co.size < co.c.batchBytes() {
		return nil
	}
	co.inflight++
	return co.take()
}

// startIdle returns the waiting entries as a batch to store at once when
// fewer than coalesceStores stores are in flight (counted in flight), nil
// otherwise; co.mu is held.
func (co *coalescer) startIdle() []*coEntry {
	if len(co.waiting) == 0 || co.inflight >= coalesceStores {
		return nil
	}
	co.inflight++
	return co.take()
}

// take empties the waiting list into a batch; co.mu is held.
func (co *coalescer) take() []*coEntry {
	b := co.waiting
	co.waiting, co.size = nil, 0
	return b
}

// flush stores batch, hands each entry the outcome, and goes on with the
// entries that gathered meanwhile, until none wait.
func (co *coalescer) flush(batch []*coEntry) {
	for {
		co.settle(batch)
		co.mu.Lock()
		if len(co.waiting) == 0 {
			co.inflight--
			co.mu.Unlock()
			return
		}
		batch = co.take()
		co.mu.Unlock()
	}
}

// settle stores batch and hands each entry its outcome. A batch refused
// as too large (its requests fit one by one, but not together with the
// batch's own bytes) is stored again one request at a time, so that only
// a request too large by itself is told so.
func (co *coalescer) settle(batch []*coEntry) {
	st, err := co.store(batch)
	if len(batch) > 1 && errors.Is(err, status.ErrTooLarge) {
		for _, e := range batch {
			st, err := co.store([]*coEntry{e})
			e.done <- coResult{st, err}
		}
		return
	}
	for _, e := range batch {
		e.done <- coResult{st, err}
	}
}

// store publishes batch's requests as one work message (a lone one as it
// is), bounded by the earliest of their deadlines: no caller waits past
// its own for a store that may yet succeed.
func (co *coalescer) store(batch []*coEntry) (stored, error) {
	first, last := batch[0].deadline, batch[0].deadline
	for _, e := range batch[1:] {
		if e.deadline.Before(first) {
			first = e.deadline
		}
		if e.deadline.After(last) {
			last = e.deadline
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), first)
	defer cancel()
	if len(batch) == 1 {
		// Alone, a durable record keeps its own id (and the partition
		// it hashes to); the others have none.
		m := batch[0].m
		return co.c.storeMsg(ctx, co.job, m, m.Header.Get(HeaderMsgID))
	}
	m := batchMsg(co.job, batch)
	if co.mode != ReplyDurable {
		m.Header.Set(HeaderDeadline, strconv.FormatInt(last.UnixNano(), 10))
	}
	if co.mode == ReplyCaller {
		m.Header.Set(HeaderBatchCallers, "true")
	}
	return co.c.storeMsg(ctx, co.job, m, "")
}

// batchMsg builds the work message of a batch. A batch of requests with
// deadlines gets the latest of them (the worker bounds the whole message
// by it; each request keeps its own).
func batchMsg(job string, batch []*coEntry) *nats.Msg {
	m := nats.NewMsg(WorkSubject(job))
	m.Header.Set(HeaderBatch, strconv.Itoa(len(batch)))
	m.Header.Set(HeaderContentType, BatchContentType)
	msgs := make([]*nats.Msg, len(batch))
	for i, e := range batch {
		msgs[i] = e.m
	}
	m.Data = encodeBatch(msgs)
	return m
}

// entrySize is what m adds to a batch body, near enough.
func entrySize(m *nats.Msg) int {
	n := len(m.Data) + 8
	for k, vs := range m.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// batchEntry is one request of a decoded batch.
type batchEntry struct {
	h    nats.Header
	data []byte
}

// encodeBatch writes msgs' headers and bodies as a batch body:
// "CSB1", uvarint count, then per request uvarint pair count, each pair
// as two length-prefixed strings, and the length-prefixed body.
func encodeBatch(msgs []*nats.Msg) []byte {
	size := len(batchMagic) + binary.MaxVarintLen64
	for _, m := range msgs {
		size += entrySize(m) + 2*binary.MaxVarintLen64
	}
	b := make([]byte, 0, size)
	b = append(b, batchMagic...)
	b = binary.AppendUvarint(b, uint64(len(msgs)))
	for _, m := range msgs {
		pairs := 0
		for _, vs := range m.Header {
			pairs += len(vs)
		}
		b = binary.AppendUvarint(b, uint64(pairs))
		for k, vs := range m.Header {
			for _, v := range vs {
				b = appendBytes(b, []byte(k))
				b = appendBytes(b, []byte(v))
			}
		}
		b = appendBytes(b, m.Data)
	}
	return b
}

func appendBytes(b, s []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// decodeBatch reads a batch body. The entries' data alias b.
func decodeBatch(b []byte) ([]batchEntry, error) {
	if len(b) < len(batchMagic) || string(b[:len(batchMagic)]) != batchMagic {
		return nil, fmt.Errorf("%w: no %s header", ErrBadBatch, batchMagic)
	}
	r := batchReader{b: b[len(batchMagic):]}
	n := r.count()
	out := make([]batchEntry, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		pairs := r.count()
		// One map and one backing array of values per request; a key
		// seen twice (rare) appends past its slice and copies.
		e := batchEntry{h: make(nats.Header, pairs)}
		vals := make([]string, pairs)
		for j := uint64(0); j < pairs && r.err == nil; j++ {
			k, v := r.bytes(), r.bytes()
			if r.err == nil {
				vals[j] = string(v)
				key := headerKey(k)
				if old, ok := e.h[key]; ok {
					e.h[key] = append(old, vals[j])
				} else {
					e.h[key] = vals[j : j+1 : j+1]
				}
			}
		}
		e.data = r.bytes()
		out = append(out, e)
	}
	switch {
	case r.err != nil:
		return nil, fmt.Errorf("%w: request %d of %d: %v", ErrBadBatch, len(out), n, r.err)
	case len(r.b) > 0:
		return nil, fmt.Errorf("%w: %d bytes after the last request", ErrBadBatch, len(r.b))
	case n == 0:
		return nil, fmt.Errorf("%w: no request in it", ErrBadBatch)
	}
	return out, nil
}

// workHeaders are the keys every work message carries: decodeBatch
// returns these strings rather than allocating a copy per request.
var workHeaders = []string{HeaderURI, HeaderContentType, HeaderReplyTo, HeaderReplyForm, HeaderReceived,
	HeaderDeadline, HeaderTraceParent, HeaderTraceState, HeaderMsgID}

// headerKey is k as a string, one of workHeaders' when it is one.
func headerKey(k []byte) string {
	for _, h := range workHeaders {
		if string(k) == h { // no allocation: the compiler compares in place
			return h
		}
	}
	return string(k)
}

// batchReader reads uvarints and length-prefixed bytes, keeping the first error.
type batchReader struct {
	b   []byte
	err error
}

func (r *batchReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errors.New("truncated length")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a count that the bytes left can hold (each item takes at
// least one byte), so that a forged count allocates nothing.
func (r *batchReader) count() uint64 {
	v := r.uvarint()
	if r.err == nil && v > uint64(len(r.b)) {
		r.err = fmt.Errorf("count %d exceeds the %d bytes left", v, len(r.b))
		return 0
	}
	return v
}

func (r *batchReader) bytes() []byte {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.err = fmt.Errorf("length %d exceeds the %d bytes left", n, len(r.b))
	}
	if r.err != nil {
		return nil
	}
	s := r.b[:n:n]
	r.b = r.b[n:]
	return s
}
