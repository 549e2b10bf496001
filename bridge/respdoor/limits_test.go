package respdoor_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	"github.com/cluster-serving/cluster-serving/bridge/respdoor"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// TestCommandTooLong closes a connection whose command passes
// MaxCommandBytes, after saying why, and serves the next connection.
func TestCommandTooLong(t *testing.T) {
	s := startOn(t, doortestMesh(t), respdoor.Config{Jobs: []string{"add"}, MaxCommandBytes: 1 << 10}, nil)
	c := dial(t, s.addr)
	// A bulk that announces 1 MiB and sends 2 KiB of it: the door must not
	// wait for the rest.
	if _, err := c.Write([]byte("*3\r\n$4\r\nECHO\r\n$1048576\r\n" + strings.Repeat("x", 2<<10))); err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(c)
	if want := "-ERR Protocol error: command longer than 1024 bytes"; !strings.HasPrefix(string(got), want) {
		t.Errorf("got %q, want %q and the connection closed", got, want)
	}
	if v, err := s.rdb.Echo(context.Background(), strings.Repeat("y", 900)).Result(); err != nil || len(v) != 900 {
		t.Errorf("ECHO of 900 bytes: got %d bytes, %v", len(v), err)
	}
}

// TestMaxConnections sheds the idlest connection for a new one.
func TestMaxConnections(t *testing.T) {
	s := startOn(t, doortestMesh(t), respdoor.Config{Jobs: []string{"add"}, MaxConnections: 2}, &goredis.Options{PoolSize: 1})
	a := dial(t, s.addr)
	if got := a.send(t, "PING\r\n"); got != "+PONG\r\n" {
		t.Fatalf("PING: got %q", got)
	}
	b := dial(t, s.addr) // the cap: the idlest (go-redis's) goes
	if got := b.send(t, "PING\r\n"); got != "+PONG\r\n" {
		t.Fatalf("PING: got %q", got)
	}
	if got := a.send(t, "PING\r\n"); got != "+PONG\r\n" {
		t.Errorf("PING on the older raw connection: got %q", got)
	}
	c := dial(t, s.addr) // b is the idlest now
	if got := c.send(t, "PING\r\n"); got != "+PONG\r\n" {
		t.Fatalf("PING: got %q", got)
	}
	if got := b.send(t, "PING\r\n"); got != "" {
		t.Errorf("PING on the idlest connection, shed: got %q, want it closed", got)
	}
}

// TestIdleTimeout closes a connection that sent nothing for IdleTimeout.
func TestIdleTimeout(t *testing.T) {
	s := startOn(t, doortestMesh(t), respdoor.Config{Jobs: []string{"add"}, IdleTimeout: 200 * time.Millisecond}, nil)
	c := dial(t, s.addr)
	got, err := io.ReadAll(c) // returns once the door closed it
	if err != nil || len(got) != 0 {
		t.Errorf("idle connection: got %q, %v, want it closed quietly", got, err)
	}
}

// TestQueueFull answers XADD -OOM once the work queue is full (no
// worker takes anything), as a Redis over maxmemory does; every XADD
// is answered and none of those refused is stored. The XADDs go one at
// a time: pipelined ones are stored together, in one message of the
// queue (mesh.Client.EnqueueBatch).
func TestQueueFull(t *testing.T) {
	full := doortest.Served{Name: "add", File: "add_f32", NoWorker: true, Stream: mesh.StreamConfig{MaxMsgs: 3}}
	s := startDoor(t, respdoor.Config{}, nil, full)
	ctx := context.Background()
	var errs []error
	for i := range 5 {
		errs = append(errs, s.rdb.XAdd(ctx, &goredis.XAddArgs{Stream: "add", Values: []any{"uri", fmt.Sprint(i), "data", "{}", "serde", "stream"}}).Err())
	}
	ok, oom := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case strings.HasPrefix(err.Error(), "OOM the work queue of job add is full"):
			oom++
		default:
			t.Errorf("XADD: got %v", err)
		}
	}
	if ok != 3 || oom != 2 {
		t.Errorf("5 XADDs to a queue of 3: got %d ids and %d OOM, want 3 and 2", ok, oom)
	}
}
