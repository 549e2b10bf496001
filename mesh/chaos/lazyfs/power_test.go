package lazyfs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/mesh/chaos/lazyfs"
)

// natsChildEnv, when set, makes the test binary a NATS server instead:
// the JSON of a natsChild. A process of its own, so that the test can
// SIGKILL it as a power loss kills a machine's processes; it runs
// embedded.Start, the single-node server cluster-serving runs, so that
// the test measures that package's defaults and not a config of its own.
const natsChildEnv = "LAZYFS_TEST_NATS_CHILD"

// natsChild configures the child: embedded.Config's StoreDir and Sync,
// and the file it writes its client URL to once it is ready.
type natsChild struct {
	Store, Sync, URLFile string
}

func TestMain(m *testing.M) {
	if v := os.Getenv(natsChildEnv); v != "" {
		os.Exit(serveNATS(v))
	}
	os.Exit(m.Run())
}

// serveNATS runs the child until SIGTERM (or SIGKILL, the point).
func serveNATS(v string) int {
	var c natsChild
	if err := json.Unmarshal([]byte(v), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s, err := embedded.Start(embedded.Config{Port: embedded.RandomPort, StoreDir: c.Store, Sync: c.Sync,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Shutdown()
	if err := os.WriteFile(c.URLFile+".tmp", []byte(s.ClientURL()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := os.Rename(c.URLFile+".tmp", c.URLFile); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	return 0
}

// natsProc is a running child.
type natsProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	url  string
}

// startNATS starts a child on store, appending its output to logPath,
// and waits until it serves. Cleanup kills it.
func startNATS(t testing.TB, store, sync, logPath string) *natsProc {
	t.Helper()
	urlFile := filepath.Join(t.TempDir(), "url")
	cfg, err := json.Marshal(natsChild{Store: store, Sync: sync, URLFile: urlFile})
	check(t, err)
	p := spawn(t, logPath, []string{natsChildEnv + "=" + string(cfg)}, os.Args[0], "-test.run=^$")
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(urlFile); err == nil {
			p.url = string(b)
			return p
		}
		select {
		case <-p.done:
			t.Fatalf("nats child exited: %v\n%s", p.cmd.ProcessState, tailOf(logPath))
		default:
		}
	}
	t.Fatalf("nats child not ready in 20s\n%s", tailOf(logPath))
	return nil
}

// spawn starts name with args and env (added to the test's) in a process
// group of its own, which natsProc.kill signals, appending its output to
// logPath after a line that dates the start. Pdeathsig: a test binary
// that dies leaves no child behind. Cleanup kills it.
func spawn(t testing.TB, logPath string, env []string, name string, args ...string) *natsProc {
	t.Helper()
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	check(t, err)
	defer out.Close() // the child has its own copy
	fmt.Fprintf(out, "=== %s start\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	check(t, cmd.Start())
	p := &natsProc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(p.kill)
	return p
}

// kill sends SIGKILL and waits for the child: the power goes.
func (p *natsProc) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

func tailOf(path string) string {
	b, _ := os.ReadFile(path)
	return string(b[max(0, len(b)-4000):])
}

// powerMsgs is how many messages each case publishes, each acknowledged.
const powerMsgs = 2000

// TestPowerLossNATS publishes acknowledged messages to a file-storage
// stream of a single-node server on a lazy mount, kills the server with
// SIGKILL, cuts the power and restarts it on the same store: with
// embedded's default (sync always) no acknowledged message may be lost;
// with nats-server's own default interval (2m) some are, which shows the
// test can see a loss.
func TestPowerLossNATS(t *testing.T) {
	for _, tc := range []struct {
		name, sync string
		wantLoss   bool
	}{
		{"default sync always", "", false},
		{"sync interval 2m", "2m", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			fsys := mount(t, lazyfs.Options{})
			store := filepath.Join(fsys.Mountpoint(), "nats")
			logPath := filepath.Join(t.TempDir(), "nats.log")
			p := startNATS(t, store, tc.sync, logPath)
			acked := publishAcked(t, p.url, powerMsgs)
			p.kill()
			dropped, err := fsys.PowerCut()
			if err != nil {
				t.Fatalf("PowerCut: %v", err)
			}
			p = startNATS(t, store, tc.sync, logPath)
			lost := missing(t, p.url, acked)
			t.Logf("sync %q: %d acknowledged, %d lost after SIGKILL and power cut (%d unsynced bytes dropped) in %v",
				tc.sync, len(acked), lost, dropped, time.Since(start).Round(time.Millisecond))
			if tc.wantLoss && lost == 0 {
				t.Errorf("got no loss, want some: the power cut dropped %d bytes and the server still had everything", dropped)
			}
			if !tc.wantLoss && lost != 0 {
				t.Errorf("got %d of %d acknowledged messages lost, want 0\n%s", lost, len(acked), tailOf(logPath))
			}
		})
	}
}

// powerStream is the stream under test: file storage, one replica.
var powerStream = jetstream.StreamConfig{Name: "POWER", Subjects: []string{"power.>"}, Storage: jetstream.FileStorage}

// publishAcked creates the stream and publishes n messages one by one,
// each waiting for its PubAck; it returns the payload of each sequence.
func publishAcked(t testing.TB, url string, n int) map[uint64]string {
	t.Helper()
	js := connectJS(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, powerStream); err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	acked := make(map[uint64]string, n)
	for i := range n {
		data := fmt.Sprintf("msg-%d", i)
		ack, err := js.Publish(ctx, "power.x", []byte(data))
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		acked[ack.Sequence] = data
	}
	return acked
}

// missing counts the acknowledged messages the restarted server does not
// have, with their payload, at their sequence; a stream that is gone has
// lost them all.
func missing(t testing.TB, url string, acked map[uint64]string) int {
	t.Helper()
	js := connectJS(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, powerStream.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Logf("stream %s is gone", powerStream.Name)
		return len(acked)
	}
	if err != nil {
		t.Fatalf("stream after restart: %v", err)
	}
	st := stream.CachedInfo().State
	t.Logf("stream %s after restart: %d messages, sequences %d to %d", powerStream.Name, st.Msgs, st.FirstSeq, st.LastSeq)
	lost := 0
	for seq, data := range acked {
		m, err := stream.GetMsg(ctx, seq)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			lost++
		case err != nil:
			t.Fatalf("get %d: %v", seq, err)
		case string(m.Data) != data:
			t.Errorf("seq %d: got %q, want %q", seq, m.Data, data)
			lost++
		}
	}
	return lost
}

func connectJS(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	check(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	check(t, err)
	return js
}
