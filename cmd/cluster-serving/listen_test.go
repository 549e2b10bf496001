package main

import (
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// holdPort listens on a free loopback port for the rest of the test, as
// another process holding it would.
func holdPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// TestPortInUseNamesTheKey runs `start` with one of its ports held by this
// test: the command fails at once with the address and the config key
// that sets it, before any model loads.
func TestPortInUseNamesTheKey(t *testing.T) {
	skipIfShort(t)
	for _, key := range []string{"natsListen", "httpPort", "grpcPort"} {
		t.Run(key, func(t *testing.T) {
			port := holdPort(t)
			extra := ""
			switch key {
			case "httpPort":
				extra = fmt.Sprintf("httpInterface: 127.0.0.1\nhttpPort: %d\n", port)
			case "grpcPort":
				extra = fmt.Sprintf("grpcPort: %d\n", port)
			}
			cfg, _, _, env := testJob(t, extra)
			if key == "natsListen" {
				cfg = rewriteKey(t, cfg, "natsListen", fmt.Sprintf("127.0.0.1:%d", port))
			}
			p := spawn(t, env, "start", "-c", cfg)
			<-p.done
			want := fmt.Sprintf("%s 127.0.0.1:%d: address already in use (another cluster-serving or ", key, port)
			if p.cmd.ProcessState.ExitCode() == 0 || !strings.Contains(p.logs(), want) {
				t.Errorf("got exit %d and\n%s\nwant a failure saying %q", p.cmd.ProcessState.ExitCode(), p.logs(), want)
			}
			if strings.Contains(p.logs(), "model loaded") {
				t.Errorf("the model loaded before the port was checked:\n%s", p.logs())
			}
		})
	}
	t.Run("metricsListen", func(t *testing.T) {
		port := holdPort(t)
		cfg, url, _, env := testJob(t, fmt.Sprintf("metricsListen: 127.0.0.1:%d\n", port))
		p := spawn(t, env, "start", "-c", cfg)
		waitReady(t, url, p) // serves without its metrics
		waitLog(t, p, fmt.Sprintf("metricsListen 127.0.0.1:%d: address already in use", port))
		p.signalAndWait(t, syscall.SIGTERM)
	})
}

// TestNodeErrorNamesNatsListen covers a port taken between the check and
// the embedded server's own bind: the real server's error, mapped to the
// key.
func TestNodeErrorNamesNatsListen(t *testing.T) {
	port := holdPort(t)
	_, err := embedded.Start(embedded.Config{Port: port, StoreDir: t.TempDir()})
	if err == nil {
		t.Fatal("embedded.Start on a held port: got no error")
	}
	file := &serving.File{NatsListen: fmt.Sprintf("127.0.0.1:%d", port)}
	got := nodeError(file, fmt.Errorf("start node: %w", err)).Error()
	want := fmt.Sprintf("natsListen 127.0.0.1:%d: address already in use (another cluster-serving or nats-server?)", port)
	if !strings.HasPrefix(got, want) {
		t.Errorf("got %q, want it to start with %q", got, want)
	}
}

// rewriteKey sets key to value in the config file at path and returns path.
func rewriteKey(t *testing.T, path, key, value string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^` + key + `: .*$`)
	if !re.Match(data) {
		t.Fatalf("%s has no key %s", path, key)
	}
	writeFile(t, path, re.ReplaceAll(data, []byte(key+": "+value)), 0o644)
	return path
}
