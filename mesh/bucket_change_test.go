package mesh_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// changes records what a ResultBucket's OnChange reports.
type changes struct {
	mu  sync.Mutex
	got []string // "uri change"
}

func (c *changes) note(uri string, ch mesh.BucketChange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, fmt.Sprintf("%s %d", uri, ch))
}

func (c *changes) count(want string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, g := range c.got {
		if g == want {
			n++
		}
	}
	return n
}

// TestBucketOnChange: a bucket reports the results stored, deleted and
// expired by its own process and by another, once each, and not those
// there before its index first read the bucket; Get answers a change when
// it is reported; nil stops the reports.
func TestBucketOnChange(t *testing.T) {
	s := meshtest.StartServer(t)
	ctx := context.Background()
	open := func() *mesh.ResultBucket {
		c, err := mesh.NewClient(meshtest.Connect(t, s), mesh.ClientConfig{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		b, err := c.ResultBucket(ctx, "job", mesh.StreamConfig{Storage: jetstream.MemoryStorage}, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	mine, other := open(), open()
	if err := other.Put(ctx, "before", []byte("v"), "id-before"); err != nil {
		t.Fatal(err)
	}
	var ch changes
	mine.OnChange(func(uri string, c mesh.BucketChange) {
		if _, ok, err := mine.Get(ctx, uri); (c == mesh.BucketPut) != ok || err != nil {
			t.Errorf("Get of %s when %d is reported: got %v, %v", uri, c, ok, err)
		}
		ch.note(uri, c)
	})
	meshtest.Run(t, mine.Watch)
	// A put before Watch first read the bucket is not reported: put new
	// ones until one is.
	theirs := ""
	for i := 0; theirs == ""; i++ {
		uri := fmt.Sprintf("theirs-%d", i)
		if err := other.Put(ctx, uri, []byte("v"), "id-"+uri); err != nil {
			t.Fatal(err)
		}
		meshtest.WaitFor(t, "Watch to read "+uri, func() bool { _, ok, _ := mine.Get(ctx, uri); return ok })
		for j := range i + 1 {
			if u := fmt.Sprintf("theirs-%d", j); ch.count(fmt.Sprintf("%s %d", u, mesh.BucketPut)) > 0 {
				theirs = u
			}
		}
	}
	if err := mine.Put(ctx, "mine", []byte("v"), "id-mine"); err != nil {
		t.Fatal(err)
	}
	// Reported from the put's acknowledgement or Watch, whichever came
	// first; once reported (its Get done), the key may go.
	meshtest.WaitFor(t, "this process's put", func() bool { return ch.count(fmt.Sprintf("mine %d", mesh.BucketPut)) > 0 })
	if ok, err := mine.Delete(ctx, "mine"); !ok || err != nil {
		t.Fatalf("Delete: got %v, %v", ok, err)
	}
	if ok, err := other.Delete(ctx, theirs); !ok || err != nil {
		t.Fatalf("Delete by the other: got %v, %v", ok, err)
	}
	for _, want := range []string{
		fmt.Sprintf("mine %d", mesh.BucketDelete), fmt.Sprintf("%s %d", theirs, mesh.BucketDelete), fmt.Sprintf("before %d", mesh.BucketExpire),
	} {
		meshtest.WaitFor(t, want, func() bool { return ch.count(want) > 0 })
	}
	for _, once := range []string{fmt.Sprintf("mine %d", mesh.BucketPut), fmt.Sprintf("%s %d", theirs, mesh.BucketPut)} {
		if n := ch.count(once); n != 1 {
			t.Errorf("%s: reported %d times, want once", once, n)
		}
	}
	if n := ch.count(fmt.Sprintf("before %d", mesh.BucketPut)); n != 0 {
		t.Errorf("a result there before Watch read the bucket: reported stored %d times", n)
	}
	mine.OnChange(nil)
	if err := mine.Put(ctx, "unheard", []byte("v"), "id-unheard"); err != nil {
		t.Fatal(err)
	}
	if n := ch.count(fmt.Sprintf("unheard %d", mesh.BucketPut)); n != 0 {
		t.Errorf("after OnChange(nil): reported %d times", n)
	}
}
