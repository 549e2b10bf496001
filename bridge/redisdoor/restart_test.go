package redisdoor_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/bridge/redisdoor"
	"github.com/cluster-serving/cluster-serving/bridge/redisdoor/redistest"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// go-redis's own lines go through the door's slog logger at warn, with
// component=go-redis, not to stderr.
func TestGoredisLogsThroughSlog(t *testing.T) {
	addr, rdb := redistest.Start(t)
	redisdoor.ResetGoredisLog()
	logs := &logBuffer{}
	if _, err := redisdoor.New(redisdoor.Config{Addr: addr}, newFakeMesh(0), slog.New(slog.NewTextHandler(logs, nil))); err != nil {
		t.Fatal(err)
	}
	// go-redis logs that it rounds a sub-millisecond expiry up.
	if err := rdb.Set(context.Background(), "k", "v", time.Microsecond).Err(); err != nil {
		t.Fatal(err)
	}
	lines := logs.lines()
	if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "component=go-redis") ||
		!strings.Contains(lines[0], "minimal supported value") {
		t.Errorf("got log lines %q, want one go-redis line at WARN with component=go-redis", lines)
	}
}

// A Redis restart (kill -9, AOF on) loses nothing: entries added before
// and after are answered, and the outage is logged once per cause, not
// once per retry.
func TestRedisRestartLosesNothing(t *testing.T) {
	srv, rdb := redistest.StartPersistent(t)
	_, _, s, direct := startParts(t)
	m := startJob(t, s, "restart", addModel)
	redisdoor.ResetGoredisLog()
	logs, _ := runLoggedDoor(t, srv.Addr, "restart", m.client)

	x := []float32{2, 4, 6, 8}
	want := wantAdd(t, direct, x)
	for i := range 10 {
		enqueue(t, rdb, "restart", fmt.Sprint("before-", i), instances(x), true)
	}
	for i := range 10 {
		if got := query(t, rdb, "restart", fmt.Sprint("before-", i)); got != want {
			t.Errorf("before-%d: got %q, want %q", i, got, want)
		}
	}
	// Entries in flight when Redis dies: read or not, enqueued or not,
	// their results written or waiting in JetStream.
	for i := range 10 {
		enqueue(t, rdb, "restart", fmt.Sprint("during-", i), instances(x), true)
	}
	srv.Kill()
	meshtest.WaitFor(t, "the door sees Redis away", func() bool { return logs.count("XREADGROUP; retrying") > 0 })
	srv.Start()
	for i := range 10 {
		enqueue(t, rdb, "restart", fmt.Sprint("after-", i), instances(x), true)
	}
	for _, p := range []string{"during-", "after-"} {
		for i := range 10 {
			if got := query(t, rdb, "restart", fmt.Sprint(p, i)); got != want {
				t.Errorf("%s%d: got %q, want %q", p, i, got, want)
			}
		}
	}
	waitEmpty(t, rdb, "restart")
	lines := logs.lines()
	if logs.count("XREADGROUP; retrying") != 1 {
		t.Errorf("got %d lines for XREADGROUP failures, want 1", logs.count("XREADGROUP; retrying"))
	}
	if len(lines) > 10 {
		t.Errorf("got %d log lines for one outage, want at most 10", len(lines))
	}
}
