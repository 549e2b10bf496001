package bench

import (
	"fmt"
	"io"
	"time"
)

// respRows measures the RESP door of child c (listening on addr) with
// the Redis door's clients and records (redisOp: XADD, poll, DEL): the
// same run, no redis-server on the way. Its rows go beside the Redis
// door's, with the XADD to result p50 of one client.
func respRows(w io.Writer, c *child, rs *redisServer, addr string, clients int, d time.Duration) {
	e2e, single, before, after := clientRuns(c, rs, addr, clients, d)
	t := table{w}
	t.row(fmt.Sprintf("RESP door, %d clients (XADD, poll, DEL)", clients), e2e)
	fmt.Fprintf(w, "  %s\n", perRequest(before, after, e2e.n))
	t.row("RESP door, 1 client, back-to-back polls", single)
	fmt.Fprintf(w, "RESP door: XADD to readable result, 1 client: p50 %s, p99 %s (no redis-server: results in JetStream KV)\n\n",
		single.pct(0.5).Round(time.Microsecond), single.pct(0.99).Round(time.Microsecond))
}

// clientRuns runs the original client's loop (redisOp on the tiny
// records, serde stream) against the Redis-protocol server at addr (a
// redis-server with the Redis door behind it, or the RESP door): clients
// of them polling every 2ms for d after a warm-up, between two CPU
// snapshots of c and rs, then one client polling back to back for d/2.
func clientRuns(c *child, rs *redisServer, addr string, clients int, d time.Duration) (e2e, single loadResult, before, after cpuSnap) {
	many, closeMany := redisOp(addr, c.job, tinyBody, "stream", 2*time.Millisecond, clients)
	defer closeMany()
	one, closeOne := redisOp(addr, c.job, tinyBody, "stream", 0, 1)
	defer closeOne()
	runLoad(8, time.Second, 500, many) // warm-up
	before = snapCPU(c, rs)
	e2e = runLoad(clients, d, 0, many)
	after = snapCPU(c, rs)
	single = runLoad(1, d/2, 0, one)
	return e2e, single, before, after
}
