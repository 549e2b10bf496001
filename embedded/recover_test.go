package embedded_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/embedded/fdtest"
)

// childFDLimit is the child's soft RLIMIT_NOFILE: low, so that running
// out of descriptors is cheap.
const childFDLimit = 256

// fdCases are the two ways a stream meets EMFILE: a publish that must
// open the stream's block file again (closed after a restart, or after
// 30 s without writes), and the store's periodic sync opening index.db
// while the stream is idle (sync_interval, 500 ms here instead of 2 min).
var fdCases = []struct {
	name string
	// syncInterval is the config file's jetstream sync_interval; "" none.
	syncInterval string
	// during runs while no descriptor is left.
	during func(t *testing.T, js jetstream.JetStream)
}{
	{name: "publish", during: func(t *testing.T, js jetstream.JetStream) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.Publish(ctx, fdStream+".x", []byte("during"))
		t.Logf("publish while no descriptor is left: %v", err)
	}},
	{name: "idle-sync", syncInterval: "500ms", during: func(*testing.T, jetstream.JetStream) {
		time.Sleep(2 * time.Second) // the sync runs at least twice
	}},
}

const fdStream = "FD"

// TestStreamAcksAgainAfterFDExhaustion runs out of file descriptors while
// the existing stream's file store needs one, releases them, and wants
// the stream to ack publishes again within 10 s, with every message acked
// before still there. Without recovery, nats-server's file store keeps
// the write error it met and the stream never acks again until the
// process restarts.
func TestStreamAcksAgainAfterFDExhaustion(t *testing.T) {
	for _, tc := range fdCases {
		t.Run(tc.name, func(t *testing.T) {
			if !fdtest.InChild() {
				fdtest.RunInChild(t, "EMBEDDED_TEST_STORE="+t.TempDir())
				return
			}
			fdExhaustionChild(t, tc.syncInterval, tc.during)
		})
	}
}

// fdExhaustionChild is the child's side: a stream whose block file is
// closed (the server restarted on its store, as after a deploy), during
// while no descriptor is left, then publishes once they are back.
func fdExhaustionChild(t *testing.T, syncInterval string, during func(*testing.T, jetstream.JetStream)) {
	dir := os.Getenv("EMBEDDED_TEST_STORE")
	const before = 20
	// A first server stores messages and stops (writing index.db); the
	// second one recovers the stream with its last block not yet open.
	s := startOn(t, dir, "")
	js := connectJS(t, s)
	if _, err := js.CreateOrUpdateStream(context.Background(), jetstream.StreamConfig{
		Name: fdStream, Subjects: []string{fdStream + ".>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	for i := range before {
		publish(t, js, i)
	}
	s.Shutdown()
	s = startOn(t, dir, syncInterval)
	t.Cleanup(s.Shutdown)
	js = connectJS(t, s)

	release := fdtest.Exhaust(t, childFDLimit)
	during(t, js)
	release()

	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := js.Publish(ctx, fdStream+".x", []byte("after"))
		cancel()
		if err == nil {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("no PubAck within 10 s of the descriptors coming back: %v", err)
		}
	}
	t.Logf("acked again %v after the descriptors came back", time.Since(start).Round(time.Millisecond))
	st, err := js.Stream(context.Background(), fdStream)
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

// startOn starts a server on the store dir, with syncInterval as its
// jetstream sync_interval unless empty; it logs warnings to stderr.
func startOn(t *testing.T, dir, syncInterval string) *embedded.Server {
	t.Helper()
	var file string
	if syncInterval != "" {
		file = filepath.Join(t.TempDir(), "nats.conf")
		if err := os.WriteFile(file, []byte("jetstream { sync_interval: \""+syncInterval+"\" }\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err := embedded.Start(embedded.Config{Port: embedded.RandomPort, StoreDir: dir, ConfigFile: file,
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
	js, err := jetstream.New(connectAs(t, "in process", "", s.ConnectOption()))
	if err != nil {
		t.Fatalf("jetstream.New: %v", err)
	}
	return js
}

func publish(t *testing.T, js jetstream.JetStream, i int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, fdStream+".x", []byte(strconv.Itoa(i))); err != nil {
		t.Fatalf("Publish %d: %v", i, err)
	}
}
