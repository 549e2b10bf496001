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
// deadline, trace context, uri. Requests with a caller's Nats-Msg-Id are
// never coalesced (JetStream's dedupe of that id needs a message of
// their own), nor are durable records (Enqueue).

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
	// callers: this coalescer's requests are NATS callers' (Forward),
	// whose batches are pinned to their partition on an unknown fate, as
	// a caller's lone request is; a door's inbox requests (Submit) have
	// a coalescer of their own and move on (the door drops a second
	// answer), so that a partition without a leader holds none of them.
	callers bool

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
// caller's id, a durable record, or too big.
func (c *Client) coalescerOf(job string, req Request, m *nats.Msg) (*coalescer, int) {
	if c.coalesce < 2 || req.MsgID != "" || req.Schedule.Level != 0 {
		return nil, 0
	}
	mode := replyOf(m.Header).Mode
	size := entrySize(m)
	if (mode != ReplyCaller && mode != ReplyInbox) || size > c.batchBytes() {
		return nil, 0
	}
	return c.coalescerFor(job, mode == ReplyCaller), size
}

// batchBytes bounds a batch's body: coalesceBytes, or half the server's
// max_payload when that is less, so that no batch of requests that each
// fit is refused as too large.
func (c *Client) batchBytes() int {
	if mp := int(c.nc.MaxPayload()) / 2; mp > 0 && mp < coalesceBytes {
		return mp
	}
	return coalesceBytes
}

// coalescerKey names a coalescer: a job, and NATS callers' requests or
// a door's inbox requests.
type coalescerKey struct {
	job     string
	callers bool
}

// coalescerFor returns the coalescer of job's NATS callers' requests
// (callers) or its doors' inbox requests, made on first use.
func (c *Client) coalescerFor(job string, callers bool) *coalescer {
	k := coalescerKey{job, callers}
	if co, ok := c.coalescers.Load(k); ok {
		return co.(*coalescer)
	}
	co, _ := c.coalescers.LoadOrStore(k, &coalescer{c: c, job: job, max: c.coalesce, callers: k.callers})
	return co.(*coalescer)
}

// add stores m, of size in a batch, alone or in a batch, and returns
// what its store did. ctx must carry a deadline; it becomes m's bound in
// the batch.
func (co *coalescer) add(ctx context.Context, m *nats.Msg, size int) (stored, error) {
	e := &coEntry{m: m, done: make(chan coResult, 1)}
	var ok bool
	if e.deadline, ok = ctx.Deadline(); !ok {
		e.deadline = time.Now().Add(DefaultSubmitTimeout) // begin bounds every ctx; in case
	}
	co.mu.Lock()
	co.waiting = append(co.waiting, e)
	co.size += size
	var batch []*coEntry
	if co.inflight < coalesceStores || len(co.waiting) >= co.max || co.size >= co.c.batchBytes() {
		batch = co.take()
		co.inflight++
	}
	co.mu.Unlock()
	if batch != nil {
		go co.flush(batch)
	}
	r := <-e.done
	return r.st, r.err
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
		st, err := co.store(batch)
		for _, e := range batch {
			e.done <- coResult{st, err}
		}
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
	m := batch[0].m
	if len(batch) > 1 {
		m = batchMsg(co.job, batch, last)
		if co.callers {
			m.Header.Set(HeaderBatchCallers, "true")
		}
	}
	return co.c.storeMsg(ctx, co.job, m, "")
}

// batchMsg builds the work message of a batch whose latest deadline is
// last (the worker bounds the whole message by it; each request keeps
// its own).
func batchMsg(job string, batch []*coEntry, last time.Time) *nats.Msg {
	m := nats.NewMsg(WorkSubject(job))
	m.Header.Set(HeaderBatch, strconv.Itoa(len(batch)))
	m.Header.Set(HeaderContentType, BatchContentType)
	m.Header.Set(HeaderDeadline, strconv.FormatInt(last.UnixNano(), 10))
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
