package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// inboxConf is README's example nats.conf (Security, NATS) with plain
// passwords for bcrypt ones, plus two users of the test's own: snoop, an
// app user of the old advice, allowed to subscribe _INBOX.>; and admin,
// unrestricted, which publishes the snoop's canary. Keep the service's
// and the app users' permissions as README gives them.
const inboxConf = `
authorization {
  SERVICE = {
    publish: ["$JS.API.>", "$JS.ACK.>", "$SRV.>", "serving.>", "_INBOX_cs.>", "_INBOX_app.>"]
    subscribe: ["$SRV.>", "serving.>", "_INBOX_cs.>"]
    allow_responses: true
  }
  users = [
    {user: serving, password: "svc-pw", permissions: $SERVICE}
    {user: alice, password: "alice-pw", permissions: {publish: "serving.*.predict", subscribe: "_INBOX_app.alice.>"}}
    {user: bob, password: "bob-pw", permissions: {publish: "serving.*.predict", subscribe: "_INBOX_app.bob.>"}}
    {user: snoop, password: "snoop-pw", permissions: {publish: "serving.*.predict", subscribe: "_INBOX.>"}}
    {user: admin, password: "admin-pw"}
  ]
}
`

// spy is a connection that subscribes to subjects its user may or may
// not read and counts what arrives and what the server refuses.
type spy struct {
	nc      *nats.Conn
	mu      sync.Mutex
	got     []string // subjects received
	refused []string // permission violations
}

func newSpy(t *testing.T, url, user string, subjects ...string) *spy {
	t.Helper()
	s := &spy{}
	nc, err := nats.Connect(url, nats.UserInfo(user, user+"-pw"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			s.mu.Lock()
			s.refused = append(s.refused, err.Error())
			s.mu.Unlock()
		}
	}))
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	s.nc = nc
	for _, subj := range subjects {
		if _, err := nc.Subscribe(subj, func(m *nats.Msg) {
			s.mu.Lock()
			s.got = append(s.got, m.Subject)
			s.mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *spy) seen() (got, refused []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...), append([]string(nil), s.refused...)
}

// TestInboxPrivacy runs start on an embedded server with README's
// nats.conf, a worker and an http door as the service user, and sends
// predict traffic through the NATS door as alice and bob (each with the
// inbox prefix their permissions allow) and through both HTTP doors.
// Meanwhile snoop, allowed to subscribe _INBOX.>, and bob, who tries >
// and alice's inboxes, read nothing: no HTTP door result, no pulled
// work, no JetStream API reply, no reply of another user, no work
// subject. Every request is answered, and status works as the service
// user.
func TestInboxPrivacy(t *testing.T) {
	skipIfShort(t)
	ports := freePorts(t, 2)
	cfg, url, job, env := testJob(t, fmt.Sprintf("natsServerConfig: %s\nhttpInterface: 127.0.0.1\nhttpPort: %d\n", writeNATSConf(t, inboxConf), ports[0]))
	start := spawn(t, env, "start", "-c", cfg)
	waitReady(t, url, start, nats.UserInfo("serving", "svc-pw"), nats.CustomInboxPrefix(serving.DefaultInboxPrefix))
	svc := append(env[:len(env):len(env)], "NATS_USER=serving", "NATS_PASSWORD=svc-pw")
	worker := spawn(t, svc, "worker", "-c", cfg, "-nats", url)
	httpCfg := filepath.Join(filepath.Dir(cfg), "http.yaml")
	copyFile(t, cfg, httpCfg)
	door := spawn(t, svc, "http", "-c", rewriteKey(t, httpCfg, "httpPort", fmt.Sprint(ports[1])), "-nats", url)
	waitLog(t, worker, "joined")
	waitLog(t, door, "HTTP door on")
	waitLog(t, start, "Stop with Ctrl-C")

	snoop := newSpy(t, url, "snoop", "_INBOX.>", "_INBOX_cs.>", "serving.>")
	peeker := newSpy(t, url, "bob", ">", "_INBOX_app.>", "_INBOX_app.alice.>", "$JS.API.>")
	var wg sync.WaitGroup
	var answered atomic.Int64
	for _, user := range []string{"alice", "bob"} {
		nc, err := nats.Connect(url, nats.UserInfo(user, user+"-pw"), nats.CustomInboxPrefix("_INBOX_app."+user))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		wg.Go(func() {
			sendAdds(t, nc, job, 60, 6, 5*time.Second, func(f float32) [4]float32 { return [4]float32{f, 1, 2, 3} }, &answered)
		})
	}
	for _, port := range ports {
		wg.Go(func() { postAdds(t, fmt.Sprintf("http://127.0.0.1:%d/predict", port), 50) })
	}
	status := runToEnd(t, svc, "status", "-c", cfg, "-once")
	wg.Wait()
	if answered.Load() != 120 {
		t.Errorf("NATS door: %d of 120 requests answered", answered.Load())
	}
	if status.cmd.ProcessState.ExitCode() != 0 || !strings.Contains(status.logs(), job) {
		t.Errorf("status as the service user: exit %d\n%s", status.cmd.ProcessState.ExitCode(), status.logs())
	}
	checkSpies(t, url, snoop, peeker)
	worker.signalAndWait(t, syscall.SIGTERM)
	n := processed(t, worker)
	t.Logf("the service user's worker served %d requests", n)
	if n == 0 {
		t.Errorf("the worker of the service user served nothing")
	}
	door.signalAndWait(t, syscall.SIGTERM)
	start.signalAndWait(t, syscall.SIGTERM)
}

// checkSpies publishes a canary to snoop's _INBOX.> as admin and, once it
// has arrived, checks that it is all snoop read, and that the server
// refused snoop's and the peeker's other subscriptions and they read
// nothing.
func checkSpies(t *testing.T, url string, snoop, peeker *spy) {
	t.Helper()
	admin, err := nats.Connect(url, nats.UserInfo("admin", "admin-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.Publish("_INBOX.canary", nil); err != nil {
		t.Fatal(err)
	}
	if err := admin.Flush(); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 10*time.Second, "the canary", func() bool {
		got, _ := snoop.seen()
		return len(got) > 0 && got[len(got)-1] == "_INBOX.canary"
	})
	if err := peeker.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	got, refused := snoop.seen()
	if !reflect.DeepEqual(got, []string{"_INBOX.canary"}) {
		t.Errorf("snoop read %d messages of others (%q), want only the canary", len(got)-1, got[:min(len(got), 5)])
	}
	if len(refused) != 2 {
		t.Errorf("snoop: got refusals %q, want _INBOX_cs.> and serving.>", refused)
	}
	got, refused = peeker.seen()
	if len(got) != 0 {
		t.Errorf("bob read %d messages (%q), want none", len(got), got[:min(len(got), 5)])
	}
	if len(refused) != 4 {
		t.Errorf("bob: got refusals %q, want all 4 subscriptions refused", refused)
	}
}

// postAdds posts n add_f32 requests to url, one after the other, and
// reports each wrong answer; it stops at the first that gets none.
func postAdds(t *testing.T, url string, n int) {
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range n {
		resp, err := client.Post(url, "application/json", strings.NewReader(fmt.Sprintf(`{"instances":[{"x":[%d,0,0,0]}]}`, i)))
		if err != nil {
			t.Errorf("POST %s: %v", url, err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got, err := decodePrediction(b)
		if resp.StatusCode != 200 || err != nil || !reflect.DeepEqual(got, []float32{float32(2*i + 1), 1, 1, 1}) {
			t.Errorf("POST %s request %d: got %d %s", url, i, resp.StatusCode, b)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, data, 0o644)
}
