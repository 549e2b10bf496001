package redisdoor_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/status"

	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	"github.com/cluster-serving/cluster-serving/bridge/redisdoor"
	"github.com/cluster-serving/cluster-serving/bridge/redisdoor/redistest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// fakeMesh records enqueued requests, fails the first failures Enqueues
// with mesh.ErrQueueFull and hands the results sent on results to the door.
type fakeMesh struct {
	mu       sync.Mutex
	reqs     []mesh.Request
	failures int
	results  chan []mesh.Result
	written  chan error
}

func newFakeMesh(failures int) *fakeMesh {
	return &fakeMesh{failures: failures, results: make(chan []mesh.Result), written: make(chan error)}
}

func (f *fakeMesh) Enqueue(_ context.Context, job string, req mesh.Request, subject string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if subject != mesh.ResultsSubject(job, "redis") {
		return fmt.Errorf("subject %q", subject)
	}
	if f.failures > 0 {
		f.failures--
		return fmt.Errorf("publish: %w", mesh.ErrQueueFull)
	}
	f.reqs = append(f.reqs, req)
	return nil
}

func (f *fakeMesh) EnqueueBatch(ctx context.Context, job string, reqs []mesh.Request, subject string) []error {
	return enqueueEach(ctx, job, reqs, subject, f.Enqueue)
}

// enqueueEach is EnqueueBatch by one enqueue per request.
func enqueueEach(ctx context.Context, job string, reqs []mesh.Request, subject string, enqueue func(context.Context, string, mesh.Request, string) error) []error {
	errs := make([]error, len(reqs))
	for i, req := range reqs {
		errs[i] = enqueue(ctx, job, req, subject)
	}
	return errs
}

func (f *fakeMesh) ConsumeResultBatches(ctx context.Context, job, durable, door string, maxBatch int, handle func(context.Context, []mesh.Result) error) error {
	for {
		select {
		case rs := <-f.results:
			f.written <- handle(ctx, rs)
		case <-ctx.Done():
			return nil
		}
	}
}

func (f *fakeMesh) requests() []mesh.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]mesh.Request(nil), f.reqs...)
}

func TestEntriesBecomeRequests(t *testing.T) {
	addr, rdb := redistest.Start(t)
	f := newFakeMesh(3) // the queue is full three times: the entry waits, never drops
	d, err := redisdoor.New(redisdoor.Config{Addr: addr, Job: "fake", RetryInterval: 10 * time.Millisecond}, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Run(t, d.Run)
	ctx := context.Background()
	arrowID := enqueue(t, rdb, "fake", "a", "QVJST1c=", false)
	jsonID, err := rdb.XAdd(ctx, &goredis.XAddArgs{Stream: "fake", Values: []any{
		"uri", "j", "data", `{"instances":[{"x":[1,2,3,4]}]}`, "serde", "stream",
		"traceparent", doortest.Traceparent}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	meshtest.WaitFor(t, "two requests", func() bool { return len(f.requests()) == 2 })
	want := map[string]mesh.Request{
		"a": {URI: "a", ContentType: wire.MediaTypeRedisArrow, Body: []byte("QVJST1c="), MsgID: "fake:" + arrowID},
		"j": {URI: "j", ContentType: wire.MediaTypeRedisJSON, Body: []byte(`{"instances":[{"x":[1,2,3,4]}]}`), MsgID: "fake:" + jsonID},
	}
	for _, got := range f.requests() {
		w := want[got.URI]
		if got.ContentType != w.ContentType || string(got.Body) != string(w.Body) || got.MsgID != w.MsgID {
			t.Errorf("got request %+v, want %+v", got, w)
		}
		if tp := got.Header["traceparent"]; (got.URI == "j") != (len(tp) == 1) {
			t.Errorf("uri %s: got traceparent %v", got.URI, tp)
		}
	}
	meshtest.WaitFor(t, "XLEN 0", func() bool { return rdb.XLen(ctx, "fake").Val() == 0 })
	if p := rdb.XPending(ctx, "fake", "serving").Val(); p.Count != 0 {
		t.Errorf("got %d pending, want 0", p.Count)
	}
}

// pipelineCounter counts pipelines and the HSETs they carry.
type pipelineCounter struct {
	mu        sync.Mutex
	pipelines []int // HSETs per pipeline that holds any
	single    int   // HSETs sent alone
}

func (*pipelineCounter) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (c *pipelineCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if strings.EqualFold(cmd.Name(), "hset") {
			c.mu.Lock()
			c.single++
			c.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}
func (c *pipelineCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		n := 0
		for _, cmd := range cmds {
			if strings.EqualFold(cmd.Name(), "hset") {
				n++
			}
		}
		if n > 0 {
			c.mu.Lock()
			c.pipelines = append(c.pipelines, n)
			c.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

// startFakeDoor runs a door of job on a real redis-server and a fakeMesh,
// with hooks on the door's Redis client.
func startFakeDoor(t *testing.T, job string, hooks ...goredis.Hook) (*fakeMesh, *goredis.Client) {
	t.Helper()
	addr, rdb := redistest.Start(t)
	f := newFakeMesh(0)
	d, err := redisdoor.New(redisdoor.Config{Addr: addr, Job: job}, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hooks {
		d.Client().AddHook(h)
	}
	meshtest.Run(t, d.Run)
	return f, rdb
}

func TestResultsWrittenInOnePipeline(t *testing.T) {
	hook := &pipelineCounter{}
	f, rdb := startFakeDoor(t, "pipe", hook)

	var batch []mesh.Result
	for i := range 10 {
		r := mesh.Result{URI: fmt.Sprint("u", i), Status: status.OK, Body: []byte(fmt.Sprint("v", i))}
		if i == 3 {
			r = mesh.Result{URI: "u3", Status: status.BadInput, Message: "bad"}
		}
		batch = append(batch, r)
	}
	f.results <- batch
	if err := <-f.written; err != nil {
		t.Fatalf("handle: %v", err)
	}
	hook.mu.Lock()
	pipes, single := hook.pipelines, hook.single
	hook.mu.Unlock()
	if len(pipes) != 1 || pipes[0] != 10 || single != 0 {
		t.Errorf("got pipelines %v and %d lone HSETs, want one pipeline of 10", pipes, single)
	}
	for i := range 10 {
		want := fmt.Sprint("v", i)
		if i == 3 {
			want = "NaN"
		}
		if got := query(t, rdb, "pipe", fmt.Sprint("u", i)); got != want {
			t.Errorf("u%d: got %q, want %q", i, got, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  redisdoor.Config
		want string // "" means valid
	}{
		{"zero", redisdoor.Config{}, "Addr"},
		{"host:port", redisdoor.Config{Addr: "localhost:6379"}, ""},
		{"url with password", redisdoor.Config{Addr: "redis://:secret@localhost:6379/0"}, ""},
		{"bad url", redisdoor.Config{Addr: "redis://host:port:x/zz"}, "Addr"},
		{"bad job", redisdoor.Config{Addr: "localhost:6379", Job: "a.b"}, "Job"},
		{"negative timeout", redisdoor.Config{Addr: "localhost:6379", Timeout: -1}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("got %v, want error naming %q", err, tt.want)
			}
		})
	}
}

// errMesh fails every Enqueue with err.
type errMesh struct {
	*fakeMesh
	err error
}

func (e errMesh) Enqueue(context.Context, string, mesh.Request, string) error { return e.err }

func (e errMesh) EnqueueBatch(ctx context.Context, job string, reqs []mesh.Request, subject string) []error {
	return enqueueEach(ctx, job, reqs, subject, e.Enqueue)
}

func TestTooLargeRecordAnswersNaN(t *testing.T) {
	addr, rdb := redistest.Start(t)
	f := errMesh{newFakeMesh(0), fmt.Errorf("mesh: enqueue to big: %w", status.ErrTooLarge)}
	d, err := redisdoor.New(redisdoor.Config{Addr: addr, Job: "big"}, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Run(t, d.Run)
	enqueue(t, rdb, "big", "huge", "data", false)
	if got := query(t, rdb, "big", "huge"); got != "NaN" {
		t.Errorf("got %q, want NaN", got)
	}
	meshtest.WaitFor(t, "XLEN 0", func() bool { return rdb.XLen(context.Background(), "big").Val() == 0 })
}

// flakyMesh fails the Enqueue of every request that fails() picks with a
// transient error (503), until heal is called; it stores the others.
type flakyMesh struct {
	*fakeMesh
	mu     sync.Mutex
	fails  func(mesh.Request) bool
	tries  map[string]int
	healed bool
}

func newFlakyMesh(fails func(mesh.Request) bool) *flakyMesh {
	return &flakyMesh{fakeMesh: newFakeMesh(0), fails: fails, tries: map[string]int{}}
}

func (f *flakyMesh) Enqueue(ctx context.Context, job string, req mesh.Request, subject string) error {
	f.mu.Lock()
	f.tries[req.URI]++
	failing := !f.healed && f.fails(req)
	f.mu.Unlock()
	if failing {
		return fmt.Errorf("mesh: enqueue to %s: no response from stream: %w", job, status.ErrBusy)
	}
	return f.fakeMesh.Enqueue(ctx, job, req, subject)
}

func (f *flakyMesh) EnqueueBatch(ctx context.Context, job string, reqs []mesh.Request, subject string) []error {
	return enqueueEach(ctx, job, reqs, subject, f.Enqueue)
}

func (f *flakyMesh) heal() {
	f.mu.Lock()
	f.healed = true
	f.mu.Unlock()
}

func (f *flakyMesh) triesOf(uri string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tries[uri]
}

// runFastDoor runs a door with cfg on a new redis-server, retrying every
// 10ms and rescanning every 50ms, and returns a client and its log.
func runFastDoor(tb testing.TB, cfg redisdoor.Config, m redisdoor.Mesh) (*goredis.Client, *logBuffer) {
	tb.Helper()
	addr, rdb := redistest.Start(tb)
	cfg.Addr, cfg.RetryInterval, cfg.Rescan = addr, 10*time.Millisecond, 50*time.Millisecond
	logs := &logBuffer{}
	d, err := redisdoor.New(cfg, m, newTextLogger(logs))
	if err != nil {
		tb.Fatal(err)
	}
	meshtest.Run(tb, d.Run)
	return rdb, logs
}

// healAndServe checks that job holds pending entries while f fails, heals
// f, and wants the stream served and stored requests in all.
func healAndServe(tb testing.TB, f *flakyMesh, rdb *goredis.Client, job string, pending int64, stored int) {
	tb.Helper()
	if p := rdb.XPending(context.Background(), job, "serving").Val(); p.Count != pending {
		tb.Errorf("got %d pending while the mesh fails, want %d", p.Count, pending)
	}
	f.heal()
	waitEmpty(tb, rdb, job)
	if got := len(f.requests()); got != stored {
		tb.Errorf("got %d requests stored, want %d", got, stored)
	}
}

// One entry that keeps failing for a transient reason holds the rest of
// its block no longer than its own retry (Timeout): they are acked and
// deleted while it stays pending and is tried again.
func TestFailingEntryDoesNotHoldItsBlock(t *testing.T) {
	f := newFlakyMesh(func(r mesh.Request) bool { return r.URI == "slow" })
	rdb, _ := runFastDoor(t, redisdoor.Config{Job: "slow", Timeout: 300 * time.Millisecond}, f)
	ctx := context.Background()
	for _, uri := range []string{"a", "slow", "b", "c"} {
		enqueue(t, rdb, "slow", uri, "data", false)
	}
	meshtest.WaitFor(t, "the others acked while slow fails", func() bool { return rdb.XLen(ctx, "slow").Val() == 1 })
	meshtest.WaitFor(t, "slow retried after its block", func() bool { return f.triesOf("slow") > 2*300/10 })
	// New entries go on while it still fails.
	enqueue(t, rdb, "slow", "d", "data", false)
	meshtest.WaitFor(t, "d served while slow fails", func() bool { return len(f.requests()) == 4 && rdb.XLen(ctx, "slow").Val() == 1 })
	healAndServe(t, f, rdb, "slow", 1, 5)
}

// While the mesh takes nothing (NATS away), the door retries the entries
// it holds instead of reading more: two blocks stay pending, not the stream.
// Once the mesh is back every entry is served.
func TestMeshAwayHoldsTwoBlocks(t *testing.T) {
	f := newFlakyMesh(func(mesh.Request) bool { return true })
	rdb, logs := runFastDoor(t, redisdoor.Config{Job: "away", Batch: 4, Timeout: 100 * time.Millisecond}, f)
	// All 20 at once (MULTI): added one by one, the door could read a
	// block of fewer than 4 between them, and hold other than two blocks.
	if _, err := rdb.TxPipelined(context.Background(), func(p goredis.Pipeliner) error {
		for i := range 20 {
			p.XAdd(context.Background(), &goredis.XAddArgs{Stream: "away", Values: []any{"uri", fmt.Sprint("u", i), "data", "data"}})
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	meshtest.WaitFor(t, "several retries of the first block", func() bool { return f.triesOf("u0") > 50 })
	healAndServe(t, f, rdb, "away", 8, 20) // two blocks of 4 held
	if n := logs.count("entries stay pending and are retried"); n != 1 {
		t.Errorf("got %d lines for the retries, want 1:\n%v", n, logs.lines())
	}
}

// logBuffer keeps the lines a slog handler writes (one record per Write);
// several goroutines may log to it.
type logBuffer struct {
	mu   sync.Mutex
	recs []string
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	b.recs = append(b.recs, strings.TrimSuffix(string(p), "\n"))
	b.mu.Unlock()
	return len(p), nil
}

// lines returns the lines written so far.
func (b *logBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.recs...)
}

// count returns how many lines hold sub.
func (b *logBuffer) count(sub string) int {
	n := 0
	for _, l := range b.lines() {
		if strings.Contains(l, sub) {
			n++
		}
	}
	return n
}

// runLoggedDoor runs a door whose log goes to the returned buffer; stop
// ends it (and flushes its counts).
func runLoggedDoor(tb testing.TB, addr, job string, m redisdoor.Mesh) (*logBuffer, func()) {
	tb.Helper()
	logs := &logBuffer{}
	d, err := redisdoor.New(redisdoor.Config{Addr: addr, Job: job, Rescan: 200 * time.Millisecond}, m, newTextLogger(logs))
	if err != nil {
		tb.Fatal(err)
	}
	return logs, meshtest.Run(tb, d.Run)
}

// waitEmpty waits until the stream holds no entry and none is pending.
func waitEmpty(tb testing.TB, rdb *goredis.Client, job string) {
	tb.Helper()
	ctx := context.Background()
	meshtest.WaitFor(tb, "XLEN 0", func() bool { return rdb.XLen(ctx, job).Val() == 0 })
	if p := rdb.XPending(ctx, job, "serving").Val(); p.Count != 0 {
		tb.Errorf("got %d pending entries, want 0", p.Count)
	}
}

func newTextLogger(b *logBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestRedeliveredResultWrittenOnce: a door killed after its HSET but before
// its ack gets the result again; the client has read and deleted the key
// by then, and must not see it come back.
func TestRedeliveredResultWrittenOnce(t *testing.T) {
	f, rdb := startFakeDoor(t, "once")
	ctx := context.Background()
	result := func(uri, id, body string) mesh.Result {
		return mesh.Result{URI: uri, Status: status.OK, Body: []byte(body), Header: map[string][]string{mesh.HeaderMsgID: {id}}}
	}
	deliver := func(rs ...mesh.Result) {
		f.results <- rs
		if err := <-f.written; err != nil {
			t.Fatalf("handle: %v", err)
		}
	}
	deliver(result("a", "once:1-0", "v1"), result("b", "once:2-0", "v2"))
	if got := query(t, rdb, "once", "a"); got != "v1" {
		t.Fatalf("a: got %q, want v1", got)
	}
	rdb.Del(ctx, redisdoor.ResultKey("once", "a")) // the client took it
	deliver(result("a", "once:1-0", "v1"), result("c", "once:3-0", "v3"))
	if n := rdb.Exists(ctx, redisdoor.ResultKey("once", "a")).Val(); n != 0 {
		t.Errorf("a came back after the client deleted it: the redelivered result was written again")
	}
	if got := query(t, rdb, "once", "c"); got != "v3" {
		t.Errorf("c: got %q, want v3", got)
	}
	if ttl := rdb.TTL(ctx, redisdoor.WrittenKey("once:1-0")).Val(); ttl <= 0 || ttl > mesh.DuplicateWindow {
		t.Errorf("marker TTL %v, want within (0, %v]", ttl, mesh.DuplicateWindow)
	}
	// query read and deleted a and c; b was never read.
	if keys := rdb.Keys(ctx, redisdoor.ResultKeyPrefix+"once:*").Val(); len(keys) != 1 || keys[0] != redisdoor.ResultKey("once", "b") {
		t.Errorf("KEYS %s*: got %v, want the result b only (markers must not match)", redisdoor.ResultKeyPrefix+"once:", keys)
	}
}
