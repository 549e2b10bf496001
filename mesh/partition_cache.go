package mesh

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// partitionsTTL is how long a door trusts the partition count it read:
// partitions added later are used after it.
const partitionsTTL = 30 * time.Second

// partitionCache remembers each job's partition count (Partitions) for
// partitionsTTL, so that a publish does not ask the server each time.
// When the server cannot answer, it keeps the count it had (1 at first)
// and asks again a second later. Safe for concurrent use.
type partitionCache struct {
	js     jetstream.JetStream
	lookup time.Duration // bounds one Partitions call

	mu sync.Mutex
	m  map[string]partitionCount
}

type partitionCount struct {
	n  int
	at time.Time // when n was read; a refresh is due partitionsTTL later
}

// get returns job's partition count; one caller refreshes a stale count
// while the others go on with it.
func (c *partitionCache) get(ctx context.Context, job string) int {
	c.mu.Lock()
	pc, ok := c.m[job]
	if ok && time.Since(pc.at) < partitionsTTL {
		c.mu.Unlock()
		return pc.n
	}
	if c.m == nil {
		c.m = map[string]partitionCount{}
	}
	if ok {
		c.m[job] = partitionCount{n: pc.n, at: time.Now()} // the others use it meanwhile
	}
	c.mu.Unlock()
	lctx, cancel := context.WithTimeout(ctx, c.lookup)
	n, err := Partitions(lctx, c.js, job)
	cancel()
	at := time.Now()
	if err != nil {
		n = max(pc.n, 1)
		at = at.Add(time.Second - partitionsTTL)
	}
	c.mu.Lock()
	c.m[job] = partitionCount{n: n, at: at}
	c.mu.Unlock()
	return n
}
