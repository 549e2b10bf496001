package mesh

import (
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// In-process answers: a Client made with ClientConfig.Local lists its
// inbox prefix in localInboxes, and a worker of the same process whose
// answer goes to that inbox (ReplyInbox: the HTTP and gRPC doors'
// requests) hands it to the Client in memory instead of publishing it.
// Through NATS an inbox answer is two messages (the answer, and the
// door's receipt that stops its bouncer, bounce.go) and four crossings
// of the server, for a door and a worker that share one process: the
// default `start`. The work message is still stored, delivered and
// acked through JetStream as before; only the answer skips the server,
// and an answer handed over in memory cannot be lost on the way (the
// bouncer's reason to be), so nothing else changes. A worker in another
// process finds no entry and publishes as before.
var localInboxes sync.Map // inbox prefix → *Client

// listenLocal lists c's inbox for this process's workers; forgetLocal
// takes it off (Close).
func (c *Client) listenLocal() { localInboxes.Store(c.prefix, c) }
func (c *Client) forgetLocal() { localInboxes.Delete(c.prefix) }

// localClient is the Client of this process, made with Local, whose
// inbox subject to is; nil when there is none.
func localClient(to string) *Client {
	i := strings.LastIndexByte(to, '.')
	if i < 0 {
		return nil
	}
	if c, ok := localInboxes.Load(to[:i]); ok {
		return c.(*Client)
	}
	return nil
}

// take hands m, an answer to c's inbox subject m.Subject, to the Submit
// waiting for it; one nobody waits for (answered already, given up) is
// dropped, as onReply drops it.
func (c *Client) take(m *nats.Msg) {
	id := strings.TrimPrefix(m.Subject, c.prefix+".")
	c.mu.Lock()
	ch, ok := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ok {
		ch <- m // buffered 1, and the entry is gone: never blocks.
	}
}
