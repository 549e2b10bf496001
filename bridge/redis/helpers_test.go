package redis_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// startRedis runs a real redis-server on a free port for one test. It
// fails in CI (CLUSTER_SERVING_REQUIRE_DEPS=1) and skips elsewhere when
// redis-server is not installed.
func startRedis(tb testing.TB) (addr string, rdb *goredis.Client) {
	tb.Helper()
	port := freePort(tb)
	runRedisServer(tb, "--port", fmt.Sprint(port))
	addr = fmt.Sprintf("127.0.0.1:%d", port)
	rdb = goredis.NewClient(&goredis.Options{Addr: addr})
	tb.Cleanup(func() { _ = rdb.Close() })
	meshtest.WaitFor(tb, "redis-server", func() bool { return rdb.Ping(context.Background()).Err() == nil })
	return addr, rdb
}

func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// runRedisServer starts redis-server with args, without persistence, and
// kills it at cleanup.
func runRedisServer(tb testing.TB, args ...string) {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CLUSTER_SERVING_REQUIRE_DEPS") == "1" {
			tb.Fatal("redis-server not found: apt-get install redis-server")
		}
		tb.Skip("redis-server not found: apt-get install redis-server")
	}
	args = append(args, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	tb.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
}

// enqueue adds a record the way the Python InputQueue does:
// XADD <stream> * uri <uri> data <data> [serde stream].
func enqueue(tb testing.TB, rdb *goredis.Client, stream, uri, data string, serde bool) string {
	tb.Helper()
	vals := []any{"uri", uri, "data", data}
	if serde {
		vals = append(vals, "serde", "stream")
	}
	id, err := rdb.XAdd(context.Background(), &goredis.XAddArgs{Stream: stream, Values: vals}).Result()
	if err != nil {
		tb.Fatalf("XADD: %v", err)
	}
	return id
}

// query reads a result the way OutputQueue.query does: HGETALL the key
// until it holds "value", then DEL it.
func query(tb testing.TB, rdb *goredis.Client, job, uri string) string {
	tb.Helper()
	key := "cluster-serving_" + job + ":" + uri
	var v string
	meshtest.WaitFor(tb, "result "+key, func() bool {
		m, err := rdb.HGetAll(context.Background(), key).Result()
		if err != nil {
			tb.Fatalf("HGETALL: %v", err)
		}
		var ok bool
		v, ok = m["value"]
		return ok
	})
	rdb.Del(context.Background(), key)
	return v
}
