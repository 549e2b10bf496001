package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/embedded"
)

// fdChildEnv marks the re-executed test binary that runs the exhaustion
// itself: lowering RLIMIT_NOFILE and using up every descriptor must not
// touch the parent test process.
const fdChildEnv = "EMBEDDED_TEST_FD_CHILD"

// childFDLimit is the child's soft RLIMIT_NOFILE: low, so that running
// out of descriptors is cheap.
const childFDLimit = 256

// TestStreamAcksAgainAfterFDExhaustion runs out of file descriptors while
// a publish needs the stream's block file, releases them, and wants the
// existing stream to ack publishes again within 10 s, with every message
// acked before still there. Without recovery, nats-server's file store
// keeps the write error it met (the stream never acks again until a
// restart).
func TestStreamAcksAgainAfterFDExhaustion(t *testing.T) {
	if os.Getenv(fdChildEnv) == "1" {
		fdExhaustionChild(t)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestStreamAcksAgainAfterFDExhaustion$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), fdChildEnv+"=1", "EMBEDDED_TEST_STORE="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
}

// fdExhaustionChild is the child's side: a stream whose block file is
// closed (the server restarted on its store, as after a deploy), a
// publish while no descriptor is left, then publishes after they are
// back.
func fdExhaustionChild(t *testing.T) {
	dir := os.Getenv("EMBEDDED_TEST_STORE")
	const name, before = "FD", 20
	// A first server stores messages and stops; the second one recovers
	// the stream with its last block not yet open for writing.
	s := startOn(t, dir)
	js := connectJS(t, s)
	if _, err := js.CreateOrUpdateStream(context.Background(), jetstream.StreamConfig{
		Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	for i := range before {
		publish(t, js, name, i, 5*time.Second)
	}
	s.Shutdown()
	s = startOn(t, dir)
	t.Cleanup(s.Shutdown)
	js = connectJS(t, s)

	lowerFDLimit(t)
	held := exhaustFDs(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, err := js.Publish(ctx, name+".x", []byte("during"))
	cancel()
	t.Logf("publish while no descriptor is left: %v", err)
	releaseFDs(held)

	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := js.Publish(ctx, name+".x", []byte("after"))
		cancel()
		if err == nil {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("no PubAck within 10 s of the descriptors coming back: %v", err)
		}
	}
	t.Logf("acked again %v after the descriptors came back", time.Since(start).Round(time.Millisecond))
	st, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	for seq := uint64(1); seq <= before; seq++ {
		msg, err := st.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatalf("message %d acked before the exhaustion: %v", seq, err)
		}
		if got, want := string(msg.Data), strconv.Itoa(int(seq-1)); got != want {
			t.Errorf("message %d: got %q, want %q", seq, got, want)
		}
	}
}

func startOn(t *testing.T, dir string) *embedded.Server {
	t.Helper()
	s, err := embedded.Start(embedded.Config{Port: embedded.RandomPort, StoreDir: dir,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return s
}

// connectJS connects in process: no socket, so the client itself does
// not need a descriptor while there is none.
func connectJS(t *testing.T, s *embedded.Server) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect("", s.ConnectOption())
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream.New: %v", err)
	}
	return js
}

func publish(t *testing.T, js jetstream.JetStream, name string, i int, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := js.Publish(ctx, name+".x", []byte(strconv.Itoa(i))); err != nil {
		t.Fatalf("Publish %d: %v", i, err)
	}
}

func lowerFDLimit(t *testing.T) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("Getrlimit: %v", err)
	}
	lim.Cur = min(lim.Cur, childFDLimit)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("Setrlimit: %v", err)
	}
}

// exhaustFDs opens /dev/null until the process has no descriptor left.
func exhaustFDs(t *testing.T) []*os.File {
	t.Helper()
	var held []*os.File
	for range childFDLimit {
		f, err := os.Open(os.DevNull)
		if errors.Is(err, syscall.EMFILE) {
			return held
		}
		if err != nil {
			releaseFDs(held)
			t.Fatalf("open: %v", err)
		}
		held = append(held, f)
	}
	releaseFDs(held)
	t.Fatal(fmt.Errorf("still opening files after %d", childFDLimit))
	return nil
}

func releaseFDs(held []*os.File) {
	for _, f := range held {
		_ = f.Close()
	}
}
