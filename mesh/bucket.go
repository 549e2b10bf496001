package mesh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
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

// ResultBucket keeps one job's results by uri in a JetStream key-value
// bucket, replicated like the job's streams, for clients that poll for
// them (the RESP door's cluster-serving_<job>:<uri> hashes). It is safe
// for concurrent use.
type ResultBucket struct {
	js      jetstream.JetStream
	kv      jetstream.KeyValue
	subject string // $KV.<bucket>.
}

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
		Storage:     streams.Storage,
		Replicas:    streams.Replicas,
	}
	var kv jetstream.KeyValue
	err := retryTransient(ctx, func() (err error) {
		kv, err = c.js.CreateOrUpdateKeyValue(ctx, cfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mesh: result bucket %s: %w", cfg.Bucket, err)
	}
	return &ResultBucket{js: c.js, kv: kv, subject: "$KV." + cfg.Bucket + "."}, nil
}

// Put keeps value under uri. msgID, the id of the record the result
// answers, makes the bucket's stream drop a second put of the same
// result within its duplicate window (DuplicateWindow, or the TTL when
// shorter): a result delivered again after the client read and deleted
// it does not come back. It returns ErrBucketURI or the publish error.
func (b *ResultBucket) Put(ctx context.Context, uri string, value []byte, msgID string) error {
	f, err := b.PutAsync(uri, value, msgID)
	if err != nil {
		return err
	}
	return f(ctx)
}

// PutAsync starts a Put and returns the wait for its acknowledgement, so
// that a batch of puts takes one round trip.
func (b *ResultBucket) PutAsync(uri string, value []byte, msgID string) (wait func(context.Context) error, err error) {
	key, err := BucketKey(uri)
	if err != nil {
		return nil, err
	}
	m := nats.NewMsg(b.subject + key)
	m.Data = value
	if msgID != "" {
		m.Header.Set(jetstream.MsgIDHeader, msgID)
	}
	f, err := b.js.PublishMsgAsync(m)
	if err != nil {
		return nil, fmt.Errorf("mesh: put result: %w", err)
	}
	return func(ctx context.Context) error {
		select {
		case <-f.Ok():
			return nil
		case err := <-f.Err():
			return fmt.Errorf("mesh: put result: %w", err)
		case <-ctx.Done():
			return fmt.Errorf("mesh: put result: %w", ctx.Err())
		}
	}, nil
}

// Get returns the result kept under uri; ok is false when there is none
// (never put, deleted, expired, or a uri no result can have).
func (b *ResultBucket) Get(ctx context.Context, uri string) (value []byte, ok bool, err error) {
	key, err := BucketKey(uri)
	if err != nil {
		return nil, false, nil
	}
	e, err := b.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("mesh: get result: %w", err)
	}
	return e.Value(), true, nil
}

// Delete removes the result of uri and reports whether there was one.
func (b *ResultBucket) Delete(ctx context.Context, uri string) (bool, error) {
	_, ok, err := b.Get(ctx, uri)
	if err != nil || !ok {
		return false, err
	}
	key, _ := BucketKey(uri) // Get checked it
	if err := b.kv.Delete(ctx, key); err != nil {
		return false, fmt.Errorf("mesh: delete result: %w", err)
	}
	return true, nil
}

// URIs lists the uris that have a result now.
func (b *ResultBucket) URIs(ctx context.Context) ([]string, error) {
	l, err := b.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("mesh: list results: %w", err)
	}
	var out []string
	for k := range l.Keys() {
		if uri, err := URIOfBucketKey(k); err == nil {
			out = append(out, uri)
		}
	}
	return out, nil
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
