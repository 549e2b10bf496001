// Package redistest helps tests that need a real redis-server, as
// net/http/httptest helps HTTP tests: a server on a free loopback port,
// without persistence, killed when the test ends. When redis-server is not
// installed the test fails in CI (CLUSTER_SERVING_REQUIRE_DEPS=1) and
// skips elsewhere (see infertest.Missing). It is for _test.go files only.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// Start runs a redis-server on a free port for one test and returns its
// address and a client to it, closed at cleanup; it returns once the
// server answers PING.
func Start(tb testing.TB) (addr string, rdb *goredis.Client) {
	tb.Helper()
	port := FreePort(tb)
	RunServer(tb, "--port", fmt.Sprint(port))
	addr = fmt.Sprintf("127.0.0.1:%d", port)
	rdb = goredis.NewClient(&goredis.Options{Addr: addr})
	tb.Cleanup(func() { _ = rdb.Close() })
	meshtest.WaitFor(tb, "redis-server", func() bool { return rdb.Ping(context.Background()).Err() == nil })
	return addr, rdb
}

// FreePort asks the kernel for a free loopback port.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// RunServer starts redis-server with args (which should name its ports)
// bound to 127.0.0.1, without persistence, and kills it at cleanup.
func RunServer(tb testing.TB, args ...string) {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		infertest.Missing(tb, "redis-server not found: apt-get install redis-server")
		return
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
