package mesh

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// cancels is what a worker knows of the requests cancelled lately and
// the runs it would cancel. Safe for concurrent use.
//
// A door's caller that goes away (a gRPC cancel, an HTTP client that
// closed its connection) ends its Submit's ctx. The Client then names the
// request, by the inbox its answer would have gone to, on CancelSubject
// (core NATS, fire and forget). Every worker of the job remembers it for
// cancelWindow: one that takes the request afterwards acks it unrun, and
// one that is running it cancels the run's context, so that an engine's
// batcher drops it before it runs (infer.Batcher drops records whose ctx
// ended), and acks it; both count it (WorkerStats.Cancelled) and answer
// nobody. A notice lost (a worker that started after it, a server that
// died with it in flight) leaves the request to run as before: its
// answer finds no waiter.
type cancels struct {
	mu      sync.Mutex
	seen    *recentIDs
	running map[string]context.CancelFunc
	sub     noteSub
}

// How long and how many cancelled requests a worker remembers.
const cancelWindow, maxCancelled = 5 * time.Minute, 1 << 16

func newCancels() *cancels {
	return &cancels{seen: newRecentIDs(cancelWindow, maxCancelled), running: map[string]context.CancelFunc{}}
}

// cancelKey is the request a work message names for cancelling: its door
// inbox; "" for a request no Client waits on.
func cancelKey(h nats.Header) string {
	r := replyOf(h)
	if r.Mode != ReplyInbox {
		return ""
	}
	return r.To
}

// listen subscribes to job's notices.
func (c *cancels) listen(nc *nats.Conn, job string) error {
	return c.sub.listen(nc, CancelSubject(job), c.heard)
}

// close unsubscribes.
func (c *cancels) close() { c.sub.close() }

// heard remembers a notice and cancels its run, if one is running here.
func (c *cancels) heard(m *nats.Msg) {
	key := string(m.Data)
	c.mu.Lock()
	c.seen.add(key, time.Now())
	cancel := c.running[key]
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// has reports whether the request key was cancelled.
func (c *cancels) has(key string) bool {
	if key == "" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen.has(key, time.Now())
}

// track makes a notice for key call cancel while the returned untrack
// has not been called; one heard already calls it at once.
func (c *cancels) track(key string, cancel context.CancelFunc) (untrack func()) {
	if key == "" {
		return func() {}
	}
	c.mu.Lock()
	c.running[key] = cancel
	gone := c.seen.has(key, time.Now()) // a notice heard since the caller looked
	c.mu.Unlock()
	if gone {
		cancel()
	}
	return func() {
		c.mu.Lock()
		delete(c.running, key)
		c.mu.Unlock()
	}
}

// cancel tells job's workers that the caller of work message m went away.
func (c *Client) cancel(job string, m *nats.Msg) {
	if key := cancelKey(m.Header); key != "" {
		_ = c.nc.Publish(CancelSubject(job), []byte(key))
	}
}

// CancelSubject is the core NATS subject on which a Client tells job's
// workers that a caller went away: serving.<job>.cancel.
func CancelSubject(job string) string { return SubjectPrefix + "." + job + ".cancel" }
