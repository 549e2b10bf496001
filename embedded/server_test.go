package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/embedded"
)

func TestStartJetStreamShutdownTwice(t *testing.T) {
	s, err := embedded.Start(embedded.Config{Port: embedded.RandomPort})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(s.Shutdown)

	for _, tc := range []struct {
		name string
		url  string
		opts []nats.Option
	}{
		{"tcp", s.ClientURL(), nil},
		{"in-process", "", []nats.Option{s.ConnectOption()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := nats.Connect(tc.url, tc.opts...)
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatalf("jetstream.New: %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			name := "T_" + tc.name[:2]
			if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}}); err != nil {
				t.Fatalf("CreateStream: %v", err)
			}
			ack, err := js.Publish(ctx, name+".x", []byte("hi"))
			if err != nil {
				t.Fatalf("Publish: %v", err)
			}
			if got, want := ack.Sequence, uint64(1); got != want {
				t.Errorf("got seq %d, want %d", got, want)
			}
			if got, want := nc.MaxPayload(), int64(embedded.DefaultMaxPayload); got != want {
				t.Errorf("got max payload %d, want %d", got, want)
			}
		})
	}
	s.Shutdown()
	s.Shutdown()
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  embedded.Config
		ok   bool
	}{
		{"zero", embedded.Config{}, true},
		{"random", embedded.Config{Port: -1}, true},
		{"bad port", embedded.Config{Port: 70000}, false},
		{"negative payload", embedded.Config{MaxPayload: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if got := err == nil; got != tc.ok {
				t.Errorf("got valid=%v (%v), want %v", got, err, tc.ok)
			}
			if err != nil && !errors.Is(err, embedded.ErrInvalidConfig) {
				t.Errorf("got %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// TestStartPortInUse holds the client port as another process would: Start
// must fail with a *ListenError that names the address and is
// EADDRINUSE, not with ErrNotReady.
func TestStartPortInUse(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	port := held.Addr().(*net.TCPAddr).Port
	s, err := embedded.Start(embedded.Config{Port: port, StoreDir: t.TempDir()})
	if err == nil {
		s.Shutdown()
		t.Fatal("Start on a port in use: got no error")
	}
	var le *embedded.ListenError
	if !errors.As(err, &le) || !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("got %v, want a *ListenError wrapping EADDRINUSE", err)
	}
	want := fmt.Sprintf("embedded: listen 127.0.0.1:%d: address already in use", port)
	if err.Error() != want || le.Addr != held.Addr().String() {
		t.Errorf("got %q (Addr %q), want %q", err, le.Addr, want)
	}
}

// TestStartFatalError gives JetStream a store directory that is a file:
// nats-server logs a fatal error and never listens; Start must return
// that error, wrapped in ErrNotReady.
func TestStartFatalError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := embedded.Start(embedded.Config{Port: embedded.RandomPort, StoreDir: file})
	if err == nil {
		s.Shutdown()
		t.Fatal("Start with a file as store dir: got no error")
	}
	if !errors.Is(err, embedded.ErrNotReady) || !strings.Contains(err.Error(), "JetStream") {
		t.Errorf("got %v, want ErrNotReady with the server's JetStream error", err)
	}
}
