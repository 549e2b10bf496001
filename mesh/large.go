package mesh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// Bodies larger than one NATS message takes (the server's max_payload,
// 1 MiB by default) travel beside their message: the sender puts the
// body in the JetStream object store BodiesBucket and sends the message
// empty, with HeaderBodyRef naming the object; the receiver reads it
// from there. Requests (Submit, Enqueue, Forward) and the answers a
// Client waits for (Submit: a door's, a pipeline step's) go this way, so
// that an image or an ensemble's intermediate tensor past max_payload
// is served instead of failing. A NATS caller's answer (Forward) and a
// durable result are still bound by max_payload: past it they fail with
// 413 (status.ErrTooLarge), never silently.
//
// The objects live in a bucket whose every object expires after
// BodiesTTL, the backstop; a Client deletes the two objects of a Submit
// once it has the answer. The bucket's storage and replicas are those of
// the first job whose request needed it (its work streams').

// bodies puts and gets the bodies of one connection's large messages.
// Safe for concurrent use.
type bodies struct {
	nc *nats.Conn
	js jetstream.JetStream

	mu    sync.Mutex
	store jetstream.ObjectStore
}

func newBodies(nc *nats.Conn, js jetstream.JetStream) *bodies { return &bodies{nc: nc, js: js} }

// inline reports whether a body of n bytes travels in its message.
func (b *bodies) inline(n int) bool { return n <= int(b.nc.MaxPayload())-bodyHeadroom }

// bucket opens BodiesBucket, creating it with job's work stream's
// storage and replicas when it does not exist (job "": defaults).
func (b *bodies) bucket(ctx context.Context, job string) (jetstream.ObjectStore, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.store != nil {
		return b.store, nil
	}
	store, err := b.js.ObjectStore(ctx, BodiesBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		cfg := jetstream.ObjectStoreConfig{Bucket: BodiesBucket, TTL: BodiesTTL, Description: "cluster-serving bodies past max_payload"}
		if job != "" {
			if s, serr := b.js.Stream(ctx, PartitionStreamName(job, 0)); serr == nil {
				cfg.Storage, cfg.Replicas = s.CachedInfo().Config.Storage, s.CachedInfo().Config.Replicas
			}
		}
		err = retryTransient(ctx, func() (err error) {
			store, err = b.js.CreateOrUpdateObjectStore(ctx, cfg)
			return err
		})
	}
	if err != nil {
		return nil, fmt.Errorf("mesh: bodies bucket %s: %w", BodiesBucket, err)
	}
	b.store = store
	return store, nil
}

// offload moves m's body to the bucket when it is too large to travel
// inline, and names it in m's headers.
func (b *bodies) offload(ctx context.Context, job string, m *nats.Msg) error {
	if b.inline(len(m.Data)) {
		return nil
	}
	store, err := b.bucket(ctx, job)
	if err != nil {
		return err
	}
	name := nuid.Next()
	// Chunks within max_payload too (the default, 128 KiB, may not be).
	meta := jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: uint32(min(128<<10, b.nc.MaxPayload()/2))}}
	if _, err := store.Put(ctx, meta, bytes.NewReader(m.Data)); err != nil {
		return fmt.Errorf("mesh: store a body of %d bytes: %w", len(m.Data), err)
	}
	m.Data = nil
	m.Header.Set(HeaderBodyRef, name)
	return nil
}

// body returns the body of a message with headers h and data: data, or
// the object HeaderBodyRef names.
func (b *bodies) body(ctx context.Context, h nats.Header, data []byte) ([]byte, error) {
	name := h.Get(HeaderBodyRef)
	if name == "" {
		return data, nil
	}
	store, err := b.bucket(ctx, "")
	if err != nil {
		return nil, err
	}
	out, err := store.GetBytes(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("mesh: read body %s from %s: %w", name, BodiesBucket, err)
	}
	return out, nil
}
