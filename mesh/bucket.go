package mesh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultBucketTTL is how long a ResultBucket keeps a result nobody
// deleted.
const DefaultBucketTTL = time.Hour

// MaxBucketURIBytes is the longest uri a ResultBucket keeps a result
// under: a key is part of a NATS subject, and an encoded uri takes up to
// three bytes per byte, well inside NATS's 4 KiB control line.
const MaxBucketURIBytes = 512

// ErrBucketURI is returned for a uri a ResultBucket cannot key: empty, or
// over MaxBucketURIBytes.
var ErrBucketURI = fmt.Errorf("mesh: a result bucket keeps uris of 1 to %d bytes", MaxBucketURIBytes)

// BucketName is the JetStream key-value bucket of job's results for the
// RESP door: SERVING_<job>_RESP (its stream is KV_SERVING_<job>_RESP).
func BucketName(job string) string { return StreamPrefix + job + "_RESP" }

// errPutSlow is a put's error when its acknowledgement took longer than
// offerAfter and the index serves its result from memory meanwhile.
var errPutSlow = errors.New("not acknowledged in time: served from memory meanwhile, to be put again")

// bucketMarkerTTL is how long the marker of a result that aged out stays.
const bucketMarkerTTL = time.Minute

// ResultBucket keeps one job's results by uri in a JetStream key-value
// bucket, replicated like the job's streams, for clients that poll for
// them (the RESP door's cluster-serving_<job>:<uri> hashes). It is safe
// for concurrent use.
type ResultBucket struct {
	js      jetstream.JetStream
	kv      jetstream.KeyValue
	subject string // $KV.<bucket>.
	stream  string // KV_<bucket>
	msgGet  string // the stream's leader get API subject

	// keys maps the keys the index knows to their last put or delete, as
	// Watch and this process's own puts, reads and deletes learn them;
	// ready while Watch runs and has read the bucket once, primed since
	// it first was.
	mu      sync.RWMutex
	keys    map[string]keyState
	ready   bool
	primed  bool
	cached  int         // bytes of the values kept in keys
	tombs   []tombstone // the landed deletes in keys, oldest first
	pending map[string]*pendingDelete

	onChange atomic.Pointer[func(uri string, c BucketChange)] // OnChange's
}

// Bounds of the values an index keeps: a client reads a result right
// after the door put it (HGETALL, then DEL), so the process that put it
// answers from memory; larger values and those past the total are read
// from the bucket.
const (
	maxCachedValue = 16 << 10
	maxCachedBytes = 32 << 20
)

// ResultBucket creates or updates job's result bucket with the replicas
// and storage of streams (StreamConfig's defaults for zero fields) and
// ttl (DefaultBucketTTL when 0), and returns it. Several processes may
// call it at once. Its errors wrap ErrInvalidJob or the JetStream error.
func (c *Client) ResultBucket(ctx context.Context, job string, streams StreamConfig, ttl time.Duration) (*ResultBucket, error) {
	if err := ValidateJob(job); err != nil {
		return nil, err
	}
	streams = streams.withDefaults()
	cfg := jetstream.KeyValueConfig{
		Bucket:      BucketName(job),
		Description: "cluster-serving results of job " + job + " for the RESP door, by uri",
		History:     1,
		TTL:         cmp.Or(ttl, DefaultBucketTTL),
		// A result that ages out leaves a marker, so that Watch's index
		// forgets it too.
		LimitMarkerTTL: bucketMarkerTTL,
		Storage:        streams.Storage,
		Replicas:       streams.Replicas,
	}
	var kv jetstream.KeyValue
	err := retryTransient(ctx, func() (err error) {
		kv, err = c.js.CreateOrUpdateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrLimitMarkerTTLNotSupported) {
			// A server before 2.11: expired results leave no marker, and
			// Watch's index keeps them until a Get finds them gone.
			cfg.LimitMarkerTTL = 0
			kv, err = c.js.CreateOrUpdateKeyValue(ctx, cfg)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mesh: result bucket %s: %w", cfg.Bucket, err)
	}
	return &ResultBucket{
		js: c.js, kv: kv, subject: "$KV." + cfg.Bucket + ".", stream: "KV_" + cfg.Bucket,
		msgGet: cmp.Or(c.js.Options().APIPrefix, jetstream.DefaultAPIPrefix) + "STREAM.MSG.GET.KV_" + cfg.Bucket,
		keys:   map[string]keyState{}, pending: map[string]*pendingDelete{},
	}, nil
}

// Get returns the result kept under uri, which the caller must not
// change; ok is false when there is none (never put, deleted, expired, or
// a uri no result can have).
//
// The index answers a key it has no result of, or whose value it keeps.
// Any other key is read from the bucket's stream leader, never by a
// direct get: a replica may answer that before it stored a put the
// leader acknowledged, and a client that polls KEYS, HGET and DEL would
// delete the result it was told of and never read. What the leader
// gives is kept in the index for the DEL that follows.
func (b *ResultBucket) Get(ctx context.Context, uri string) (value []byte, ok bool, err error) {
	key, err := BucketKey(uri)
	if err != nil {
		return nil, false, nil
	}
	value, _, ok, err = b.get(ctx, key)
	return value, ok, err
}

// get is Get of key; it also returns the message id of the result.
func (b *ResultBucket) get(ctx context.Context, key string) (value []byte, msgID string, ok bool, err error) {
	st, known, ready := b.lookup(key)
	switch {
	case st.gone && (ready || st.rev == pendingRev), ready && !known:
		return nil, "", false, nil
	case st.value != nil && ready:
		// A value kept is right while Watch serves the index: without
		// it, a delete by another process would go unseen.
		return st.value, st.msgID, true, nil
	}
	m, err := b.last(ctx, key)
	switch {
	case err != nil:
		return nil, "", false, fmt.Errorf("mesh: get result: %w", err)
	case m == nil, st.gone && m.Sequence <= st.rev:
		return nil, "", false, nil
	}
	if put, id := b.learnt(key, m.Sequence, m.Header, m.Data); put {
		return m.Data, id, true, nil
	}
	return nil, "", false, nil // a delete, purge or expiry marker
}

// Delete removes the result of uri and reports whether there was one.
// It reads the result first (Get) and fails when it cannot: a client
// whose HGET failed must not lose the result to the DEL that followed.
// While Watch serves the index, the key is hidden from then on and its
// marker stored in the background (Watch publishes it again until it
// lands): a NATS node electing a leader delays no DEL, and a result
// read and deleted is never listed or read again here. A process killed
// before the marker landed leaves the result in the bucket. The marker
// names the result it deletes (headerResultID), so that no put of that
// result brings it back (see PutAsync).
func (b *ResultBucket) Delete(ctx context.Context, uri string) (bool, error) {
	deleted, commit, err := b.DeleteLater(ctx, uri)
	commit(true)
	return deleted, err
}

// DeleteLater is Delete with the marker held back until commit: the key
// is hidden at once, and commit(true) stores its marker (as Delete
// does), commit(false) shows the key again. The RESP door commits once
// the client's answer is written: a client polls with HGET and DEL
// pipelined, and a door killed after it stored the marker but before the
// client read the value lost the result; killed before the commit, the
// result stays in the bucket, to be read again. commit is never nil;
// call it once. While the index does not serve, the marker is stored
// before DeleteLater returns and commit does nothing.
func (b *ResultBucket) DeleteLater(ctx context.Context, uri string) (deleted bool, commit func(sent bool), err error) {
	none := func(bool) {}
	key, err := BucketKey(uri)
	if err != nil || !b.maybe(key) {
		return false, none, nil
	}
	_, msgID, had, err := b.get(ctx, key)
	if err != nil || !had {
		return false, none, err
	}
	if p := b.hold(key); p != nil {
		return true, func(sent bool) { b.commit(key, p, sent) }, nil
	}
	ack, err := b.js.PublishMsg(ctx, b.marker(key, msgID))
	if err != nil {
		return false, none, fmt.Errorf("mesh: delete result: %w", err)
	}
	b.note(key, ack.Sequence, false, nil, msgID)
	return true, none, nil
}

// URIs lists the uris that have a result now: the index's while Watch
// serves it, else the bucket's. Clients poll KEYS many times a second,
// and listing the bucket makes a consumer on its stream each time: load
// on the stream's leader, which a stream electing one cannot serve.
func (b *ResultBucket) URIs(ctx context.Context) ([]string, error) {
	if keys, ok := b.indexed(); ok {
		out := make([]string, 0, len(keys))
		for _, k := range keys {
			if uri, err := URIOfBucketKey(k); err == nil {
				out = append(out, uri)
			}
		}
		return out, nil
	}
	l, err := b.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("mesh: list results: %w", err)
	}
	var out []string
	for k := range l.Keys() {
		if b.hidden(k) {
			continue
		}
		if uri, err := URIOfBucketKey(k); err == nil {
			out = append(out, uri)
		}
	}
	return out, nil
}

func (b *ResultBucket) setReady(ready bool) {
	b.mu.Lock()
	b.ready = ready
	b.primed = b.primed || ready
	b.mu.Unlock()
}

// A bucket key must match [-/_=.A-Za-z0-9]+ with no empty dot-separated
// token. BucketKey keeps the bytes [A-Za-z0-9_-] of a uri as they are, so
// that usual ids stay readable in `nats kv ls`, and writes every other
// byte as '=' and two upper-case hex digits: "cat 1.jpg" is "cat=201=2Ejpg".
// URIOfBucketKey reverses it.
const hexDigits = "0123456789ABCDEF"

// BucketKey is the key of uri in a ResultBucket; ErrBucketURI for an
// empty uri or one over MaxBucketURIBytes.
func BucketKey(uri string) (string, error) {
	if uri == "" || len(uri) > MaxBucketURIBytes {
		return "", ErrBucketURI
	}
	var b strings.Builder
	b.Grow(len(uri))
	for i := 0; i < len(uri); i++ {
		c := uri[i]
		if keyByte(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('=')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String(), nil
}

// errBucketKey is URIOfBucketKey's error for a key BucketKey cannot make.
var errBucketKey = errors.New("mesh: not a result bucket key")

// URIOfBucketKey returns the uri of a key made by BucketKey; an error for
// any other string.
func URIOfBucketKey(key string) (string, error) {
	out := make([]byte, 0, len(key))
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case keyByte(c):
			out = append(out, c)
		case c == '=' && i+2 < len(key) && unhex(key[i+1]) >= 0 && unhex(key[i+2]) >= 0:
			v := byte(unhex(key[i+1])<<4 | unhex(key[i+2]))
			if keyByte(v) {
				return "", errBucketKey // BucketKey keeps it as it is
			}
			out = append(out, v)
			i += 2
		default:
			return "", errBucketKey
		}
	}
	if len(out) == 0 || len(out) > MaxBucketURIBytes {
		return "", errBucketKey
	}
	return string(out), nil
}

func keyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// unhex is the value of an upper-case hex digit, -1 for another byte.
func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// QueueBytes sums the bytes job's work queue holds now over its
// partitions (used) and their limits (limit; 0 when any partition has
// none): the RESP door's INFO used_memory and maxmemory.
func (c *Client) QueueBytes(ctx context.Context, job string) (used, limit int64, err error) {
	n, err := Partitions(ctx, c.js, job)
	if err != nil {
		return 0, 0, err
	}
	unlimited := false
	for p := range n {
		s, err := c.js.Stream(ctx, PartitionStreamName(job, p))
		if err != nil {
			return 0, 0, fmt.Errorf("mesh: queue of %s: %w", job, err)
		}
		info := s.CachedInfo()
		used += int64(info.State.Bytes)
		if info.Config.MaxBytes <= 0 {
			unlimited = true
		}
		limit += info.Config.MaxBytes
	}
	if unlimited {
		limit = 0
	}
	return used, limit, nil
}
