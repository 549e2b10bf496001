package redisdoor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/bridge/redisdoor"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// Entries that can never be queued (a uri over the limit, no data, no
// uri) are answered once under their exact key and acked; the good
// entries around them are answered at once, and so is one whose body is
// past the NATS max payload (it travels beside its message, in
// mesh.BodiesBucket).
func TestPoisonBesideGoodEntries(t *testing.T) {
	addr, rdb, s, direct := startParts(t)
	m := startJob(t, s, "poison", addModel)
	logs, _ := runLoggedDoor(t, addr, "poison", m.client)
	ctx := context.Background()

	x := []float32{1, 2, 3, 4}
	longURI := "long-" + strings.Repeat("\x00u\r\n", 25<<10) // 100 KiB
	bigBody := instances(x) + strings.Repeat(" ", 9<<20)     // past the 8 MiB max payload
	enqueue(t, rdb, "poison", "good-0", instances(x), true)
	enqueue(t, rdb, "poison", longURI, instances(x), true)
	enqueue(t, rdb, "poison", "good-1", instances(x), true)
	enqueue(t, rdb, "poison", "big-body", bigBody, true)
	rdb.XAdd(ctx, &goredis.XAddArgs{Stream: "poison", Values: []any{"data", instances(x)}}) // no uri
	// A traceparent no header can carry is dropped; the record is served.
	rdb.XAdd(ctx, &goredis.XAddArgs{Stream: "poison", Values: []any{"uri", "big-trace", "data", instances(x), "serde", "stream",
		"traceparent", strings.Repeat("t", 100<<10)}})
	enqueue(t, rdb, "poison", "good-2", instances(x), true)

	want := wantAdd(t, direct, x)
	for _, uri := range []string{"good-0", "good-1", "big-trace", "good-2", "big-body"} {
		if got := query(t, rdb, "poison", uri); got != want {
			t.Errorf("%s: got %q, want %q", uri, got, want)
		}
	}
	if got := query(t, rdb, "poison", longURI); got != redisdoor.NaN {
		t.Errorf("%.20q: got %q, want NaN", longURI, got)
	}
	waitEmpty(t, rdb, "poison")
	if n := logs.count("refused it"); n != 1 {
		t.Errorf("got %d lines about refused records, want 1 (uri too long):\n%s", n, strings.Join(logs.lines(), "\n"))
	}
	if n := logs.count("entry without uri"); n != 1 {
		t.Errorf("got %d lines about the entry without uri, want 1", n)
	}
}

// oddURIs are uris that NATS headers would change, as a client may send them.
var oddURIs = []string{" lead", "trail ", "x\r\ny", "tab\there", "non-utf8-\xff\xfe", "nul\x00", mesh.URIEncodedPrefix + "plain",
	"ünïcode", "a b", strings.Repeat("\n", mesh.MaxURIBytes)}

// Every uri comes back under exactly its key.
func TestOddURIsByteExact(t *testing.T) {
	addr, rdb, s, direct := startParts(t)
	m := startJob(t, s, "uris", addModel)
	runDoor(t, addr, "uris", m.client)

	x := []float32{4, 3, 2, 1}
	for _, uri := range oddURIs {
		enqueue(t, rdb, "uris", uri, instances(x), true)
	}
	want := wantAdd(t, direct, x)
	for _, uri := range oddURIs {
		if got := query(t, rdb, "uris", uri); got != want {
			t.Errorf("%.20q: got %q, want %q", uri, got, want)
		}
	}
	waitEmpty(t, rdb, "uris")
	if keys := rdb.Keys(context.Background(), "cluster-serving_uris:*").Val(); len(keys) != 0 {
		t.Errorf("got result keys %q left, want none: every result under its exact key", keys)
	}
}

// A storm of bad entries writes a bounded number of log lines: once per
// cause, with counts, not once per entry.
func TestPoisonStormLogsOncePerCause(t *testing.T) {
	addr, rdb, s, direct := startParts(t)
	m := startJob(t, s, "storm", addModel)
	logs, stop := runLoggedDoor(t, addr, "storm", m.client)
	ctx := context.Background()

	const n = 1000
	long := strings.Repeat("u", mesh.MaxURIBytes)
	pipe := rdb.Pipeline()
	for i := range n {
		switch i % 3 {
		case 0: // refused by the mesh: uri over the limit
			pipe.XAdd(ctx, &goredis.XAddArgs{Stream: "storm", Values: []any{"uri", fmt.Sprint(long, i), "data", "x"}})
		case 1: // answered NaN by the worker: bad JSON
			pipe.XAdd(ctx, &goredis.XAddArgs{Stream: "storm", Values: []any{"uri", fmt.Sprint("bad-", i), "data", `{"instances":[{`, "serde", "stream"}})
		case 2: // no data
			pipe.XAdd(ctx, &goredis.XAddArgs{Stream: "storm", Values: []any{"uri", fmt.Sprint("nodata-", i)}})
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	x := []float32{1, 1, 2, 3}
	enqueue(t, rdb, "storm", "good", instances(x), true)
	if got, want := query(t, rdb, "storm", "good"), wantAdd(t, direct, x); got != want {
		t.Errorf("good after the storm: got %q, want %q", got, want)
	}
	meshtest.WaitFor(t, "every bad entry answered", func() bool {
		return len(rdb.Keys(ctx, "cluster-serving_storm:*").Val()) == n
	})
	waitEmpty(t, rdb, "storm")
	stop() // flushes the counts left out
	lines := logs.lines()
	if len(lines) > 20 {
		t.Errorf("got %d log lines for %d bad entries, want at most 20:\n%s", len(lines), n, strings.Join(lines, "\n"))
	}
	for _, want := range []string{"refused it", "record answered NaN", "entry without data", "more since"} {
		if logs.count(want) == 0 {
			t.Errorf("no log line holds %q:\n%s", want, strings.Join(lines, "\n"))
		}
	}
}
