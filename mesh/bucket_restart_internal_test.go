package mesh

import (
	"context"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// startStore runs an embedded server on port (embedded.RandomPort for
// any) with its JetStream store in dir, shut down at cleanup.
func startStore(t *testing.T, dir string, port int) *embedded.Server {
	t.Helper()
	s, err := embedded.Start(embedded.Config{Port: port, StoreDir: dir})
	if err != nil {
		t.Fatalf("embedded.Start: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// fileBucket opens job's result bucket, stored in files, on a connection
// to s that reconnects at once to a server restarted on its port.
func fileBucket(t *testing.T, s *embedded.Server, watch bool) (*ResultBucket, *nats.Conn) {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c, err := NewClient(nc, ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	b, err := c.ResultBucket(context.Background(), "job", StreamConfig{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if watch {
		meshtest.Run(t, b.Watch)
		meshtest.WaitFor(t, "the index", func() bool { _, ok := b.indexed(); return ok })
	}
	return b, nc
}

// TestResultBucketDeleteSurvivesRestart: a result a client read and
// deleted does not come back when it is put again (same msgID: a
// worker's batch run again, a results consumer replaying) after the NATS
// server restarted on the same store. The stream's duplicate window is
// rebuilt at a restart from the messages still stored only, and the
// delete marker replaced the put (History 1): the stream took the put
// again, and the client read the result a second time. The marker now
// names the result it deletes, and a put of that result does nothing:
// in a new process (its index not read yet, or read), and in the same
// one (its index kept the tombstone). A new result of the uri is put.
func TestResultBucketDeleteSurvivesRestart(t *testing.T) {
	for _, tc := range []struct {
		name          string
		reopen, watch bool
	}{
		{"a new process", true, false},
		{"a new process with its index", true, true},
		{"the same process with its index", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			s := startStore(t, dir, embedded.RandomPort)
			b, nc := fileBucket(t, s, !tc.reopen && tc.watch)
			if err := b.Put(ctx, "u", []byte("v"), "id-1"); err != nil {
				t.Fatal(err)
			}
			if v, ok, err := b.Get(ctx, "u"); !ok || err != nil || string(v) != "v" {
				t.Fatalf("Get: got %q, %v, %v, want v", v, ok, err)
			}
			if ok, err := b.Delete(ctx, "u"); !ok || err != nil {
				t.Fatalf("Delete: got %v, %v, want true", ok, err)
			}
			meshtest.WaitFor(t, "the delete marker", func() bool {
				m, err := b.last(ctx, mustKey(t, "u"))
				return err == nil && m != nil && m.Header.Get(kvOperationHeader) == "DEL"
			})

			u, err := url.Parse(s.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			port, _ := strconv.Atoi(u.Port())
			s.Shutdown()
			s = startStore(t, dir, port)
			if tc.reopen {
				b, _ = fileBucket(t, s, tc.watch)
			} else {
				meshtest.WaitFor(t, "the reconnect", nc.IsConnected)
			}
			meshtest.WaitFor(t, "the put again", func() bool { return b.Put(ctx, "u", []byte("v"), "id-1") == nil })
			if v, ok, err := b.Get(ctx, "u"); ok || err != nil {
				t.Errorf("Get of the deleted result put again after the restart: got %q, %v, %v, want nothing", v, ok, err)
			}
			if err := b.Put(ctx, "u", []byte("new"), "id-2"); err != nil {
				t.Fatal(err)
			}
			if v, ok, err := b.Get(ctx, "u"); !ok || err != nil || string(v) != "new" {
				t.Errorf("Get of a new result of the uri: got %q, %v, %v, want new", v, ok, err)
			}
		})
	}
}
