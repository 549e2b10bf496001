package mesh

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// A Submit's answer comes on core NATS, to the Client's inbox: a worker
// that answers while the Client's connection is away (its server died, or
// KeepReachable moved it off a server cut off from its cluster) sends it
// to nobody, and the request, acked by then, is never run again. The
// caller waited until its deadline for a 504 (the fault suite's HTTP
// requests "never answered" at NATS kills and partitions). So a Submit
// still waiting when its connection comes back gives the answer a moment
// to arrive (the worker may not have answered yet) and then stores its
// request again, under a new Nats-Msg-Id, so that it runs again; the
// first answer wins and a second finds no waiter. A request with the
// caller's own MsgID cannot be stored twice (JetStream's dedupe) and
// waits. The cost: a request whose answer was not lost runs twice.
const resubmitAfter = time.Second

// reconnectChain serializes the chaining of reconnect handlers.
var reconnectChain sync.Mutex

// watchReconnects closes c.reconnected at every reconnect of c.nc, after
// whatever reconnect handler was set before (a Client chains, so that
// several Clients may share a connection).
func (c *Client) watchReconnects() {
	// Clients made at once on one connection (a node's ensembles) must
	// not read the same prev: one's handler would be lost.
	reconnectChain.Lock()
	defer reconnectChain.Unlock()
	prev := c.nc.Opts.ReconnectedCB
	c.nc.SetReconnectHandler(func(nc *nats.Conn) {
		if prev != nil {
			prev(nc)
		}
		c.mu.Lock()
		close(c.reconnected)
		c.reconnected = make(chan struct{})
		c.mu.Unlock()
	})
}

// reconnects is closed at the next reconnect.
func (c *Client) reconnects() chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reconnected
}

// storeAgain waits resubmitAfter for the answer of m, a request of job
// stored before its connection went away, and stores m again alone under
// a new Nats-Msg-Id when none came. An answer that comes meanwhile stays
// in ch for the caller.
func (c *Client) storeAgain(ctx context.Context, job string, m *nats.Msg, ch chan *nats.Msg) {
	select {
	case reply := <-ch:
		ch <- reply // buffered 1, and no one else sends after the first
		return
	case <-ctx.Done():
		return
	case <-time.After(resubmitAfter):
	}
	_, _ = c.storeMsg(ctx, job, m, "") // a new Nats-Msg-Id; an error leaves the caller waiting, as before
}
