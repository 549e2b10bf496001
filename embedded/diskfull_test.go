package embedded_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/mesh/chaos/lazyfs"
	"github.com/cluster-serving/cluster-serving/telemetry/telemetrytest"
)

const (
	diskStream = "DISK"
	// diskSize is the disk's size while it is not full, as statfs
	// reports it: nats-server derives its max_file (75 % of the space
	// free) from it at start, so it must not be the few MiB the disk
	// later fills up with, or JetStream's own limit would refuse writes
	// (10023) before the disk runs out.
	diskSize = 1 << 30
	// diskRoom is how much the disk takes once it is made small.
	diskRoom = 3 << 20
	// diskMsgSize is a message's payload, about a model's input.
	diskMsgSize = 12 << 10
	// diskPubTimeout bounds each publish: a write nats-server's file
	// store fails is never answered (recover.go), so a timeout is what
	// a publisher sees while the disk is full.
	diskPubTimeout = time.Second
	// diskRecoverWithin is how long the stream has to ack again once
	// the disk has room: the watcher's pause between restarts is at
	// most 8 s.
	diskRecoverWithin = 15 * time.Second
)

// TestStreamAcksAgainAfterDiskFull fills the disk under a file stream
// (sync always), logs what publishers get while it is full, gives the
// disk room again and wants the stream to ack again within 15 s without
// a restart of the server, every acknowledged message still readable,
// and JetStream's max_file as large as at start: a JetStream restart
// that derived it from the space free on the full disk would refuse
// every write afterwards (keepStoreLimits).
func TestStreamAcksAgainAfterDiskFull(t *testing.T) {
	fsys := lazyfs.MountForTest(t, t.TempDir(), lazyfs.Options{Capacity: diskSize})
	logs := &telemetrytest.LogBuffer{}
	s := startOnDisk(t, fsys.Mountpoint(), logs)
	jsz := monitorURL(t, logs) + "/jsz"
	maxAtStart := maxFile(t, jsz)
	js := connectJS(t, s)
	if _, err := js.CreateOrUpdateStream(context.Background(), jetstream.StreamConfig{
		Name: diskStream, Subjects: []string{diskStream + ".>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	acked := map[uint64]int{} // sequence → message number
	n := 0
	if err := fsys.SetCapacity(fsys.Used() + diskRoom); err != nil {
		t.Fatal(err)
	}
	for ; ; n++ {
		seq, _, err := tryPublish(js, n)
		if err != nil {
			t.Logf("disk full after %d acked publishes (%d KiB used): publish %d: %v", len(acked), fsys.Used()>>10, n, err)
			break
		}
		acked[seq] = n
		if n > 2*diskRoom/diskMsgSize {
			t.Fatalf("%d publishes acked, %d KiB used, and the disk is still not full", n, fsys.Used()>>10)
		}
	}
	n = publishWhileFull(t, js, logs, n+1, acked)

	if err := fsys.SetCapacity(diskSize); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for ; ; n++ {
		seq, _, err := tryPublish(js, n)
		if err == nil {
			acked[seq] = n
			break
		}
		if time.Since(start) > diskRecoverWithin {
			t.Fatalf("no PubAck within %v of the disk having room: %v (max_file now %d bytes, %d at start)",
				diskRecoverWithin, err, maxFile(t, jsz), maxAtStart)
		}
	}
	t.Logf("acked again %v after the disk had room", time.Since(start).Round(time.Millisecond))
	for range 20 {
		n++
		seq, _, err := tryPublish(js, n)
		if err != nil {
			t.Fatalf("publish %d after recovery: %v", n, err)
		}
		acked[seq] = n
	}
	checkAcked(t, js, acked)
	if got := maxFile(t, jsz); got < maxAtStart/2 {
		t.Errorf("max_file after recovery: got %d bytes, want at least half of the %d at start", got, maxAtStart)
	}
}

// publishWhileFull publishes messages from n on while the disk is full,
// at least three and until the store watcher has restarted JetStream
// (on the full disk: what derived a tiny max_file before
// keepStoreLimits), and logs what each got. Each must fail within its
// timeout, or be acked (recorded in acked). It returns the next n.
func publishWhileFull(t *testing.T, js jetstream.JetStream, logs *telemetrytest.LogBuffer, n int, acked map[uint64]int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 3 || !strings.Contains(logs.String(), "restarted JetStream"); i, n = i+1, n+1 {
		if time.Now().After(deadline) {
			t.Fatal("the store watcher did not restart JetStream within 10 s of the disk filling up")
		}
		seq, took, err := tryPublish(js, n)
		if err == nil {
			t.Logf("publish %d while full: acked as %d", n, seq)
			acked[seq] = n
			continue
		}
		t.Logf("publish %d while full: %s after %v: %v", n, errorKind(err), took.Round(time.Millisecond), err)
		if took > diskPubTimeout+500*time.Millisecond {
			t.Errorf("publish %d while full took %v, past its timeout of %v", n, took, diskPubTimeout)
		}
	}
	return n
}

// errorKind names what a failed publish got, for the log.
func errorKind(err error) string {
	var api *jetstream.APIError
	switch {
	case errors.As(err, &api):
		return fmt.Sprintf("API error %d", api.ErrorCode)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return "timeout"
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return "no responders"
	}
	return "other"
}

// tryPublish publishes message n with diskPubTimeout, returning its
// sequence and how long it took.
func tryPublish(js jetstream.JetStream, n int) (uint64, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), diskPubTimeout)
	defer cancel()
	start := time.Now()
	ack, err := js.Publish(ctx, diskStream+".x", diskPayload(n))
	if err != nil {
		return 0, time.Since(start), err
	}
	return ack.Sequence, time.Since(start), nil
}

// diskPayload is message n: its number, then a filler that depends on it.
func diskPayload(n int) []byte {
	p := bytes.Repeat([]byte{byte('a' + n%26)}, diskMsgSize)
	copy(p, fmt.Sprintf("message %d\n", n))
	return p
}

// checkAcked wants every acknowledged message in the stream, at the
// sequence its PubAck named, with its payload.
func checkAcked(t *testing.T, js jetstream.JetStream, acked map[uint64]int) {
	t.Helper()
	st, err := js.Stream(context.Background(), diskStream)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	for seq, n := range acked {
		msg, err := st.GetMsg(context.Background(), seq)
		if err != nil {
			t.Errorf("message %d, acked as %d: %v", n, seq, err)
			continue
		}
		if !bytes.Equal(msg.Data, diskPayload(n)) {
			t.Errorf("sequence %d: got %.20q (%d bytes), want message %d", seq, msg.Data, len(msg.Data), n)
		}
	}
	t.Logf("%d acknowledged messages all read back", len(acked))
}

// startOnDisk starts a server storing in dir (default Sync: always) with
// its monitoring port on a random port, logging to logs; it shuts down
// before the disk is unmounted.
func startOnDisk(t *testing.T, dir string, logs *telemetrytest.LogBuffer) *embedded.Server {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte("http_port: -1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := embedded.Start(embedded.Config{Port: embedded.RandomPort, StoreDir: dir, ConfigFile: conf,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		s.Shutdown()
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
				t.Log(l)
			}
		}
	})
	return s
}

var monitorLine = regexp.MustCompile(`Starting http monitor on (\S+?)"`)

// monitorURL is the monitoring endpoint's URL, from the server's log:
// embedded.Server does not expose it.
func monitorURL(t *testing.T, logs *telemetrytest.LogBuffer) string {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := monitorLine.FindStringSubmatch(logs.String()); m != nil {
			return "http://" + m[1]
		}
	}
	t.Fatal("the server logged no monitoring address")
	return ""
}

// maxFile is JetStream's max_file (max_storage) in bytes, from /jsz.
func maxFile(t *testing.T, url string) int64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var jsz struct {
		Config struct {
			MaxStorage int64 `json:"max_storage"`
		} `json:"config"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&jsz); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	t.Logf("max_file: %d bytes", jsz.Config.MaxStorage)
	return jsz.Config.MaxStorage
}
