package mesh_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"golang.org/x/sync/errgroup"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

func TestSubmitThroughTwoWorkers(t *testing.T) {
	sc := mesh.StreamConfig{Job: "echo", Storage: jetstream.MemoryStorage}
	s, nc := startStreams(t, sc)
	fake := newFake()
	w1, _ := runWorker(t, meshtest.Connect(t, s), mesh.WorkerConfig{Stream: sc}, fake)
	w2, _ := runWorker(t, meshtest.Connect(t, s), mesh.WorkerConfig{Stream: sc}, fake)
	c := newClient(t, nc)

	const n, conc = 1000, 32
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(conc)
	for i := range n {
		g.Go(func() error {
			body := fmt.Sprintf("req-%d", i)
			res, err := c.Submit(gctx, "echo", mesh.Request{URI: "uri-" + strconv.Itoa(i), Body: []byte(body)})
			if err != nil {
				return fmt.Errorf("request %d: %w", i, err)
			}
			if got, want := string(res.Body), strings.ToUpper(body); got != want {
				return fmt.Errorf("request %d: got body %q, want %q", i, got, want)
			}
			if got, want := res.URI, "uri-"+strconv.Itoa(i); got != want {
				return fmt.Errorf("request %d: got uri %q, want %q", i, got, want)
			}
			if got, want := res.Status, 200; got != want {
				return fmt.Errorf("request %d: got status %d, want %d", i, got, want)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if got, want := fake.count(fmt.Sprintf("req-%d", i)), 1; got != want {
			t.Errorf("request %d: got %d Predict calls, want %d", i, got, want)
		}
	}
	s1, s2 := w1.Stats(), w2.Stats()
	if got, want := s1.Processed+s2.Processed, uint64(n); got != want {
		t.Errorf("got %d processed, want %d", got, want)
	}
	if s1.Processed == 0 || s2.Processed == 0 {
		t.Logf("one worker took everything: %d / %d", s1.Processed, s2.Processed)
	}
	meshtest.WaitFor(t, "empty queue", func() bool { return queueLen(t, newJS(t, nc), "echo") == 0 })
}

func TestServiceEndpoint(t *testing.T) {
	sc := mesh.StreamConfig{Job: "svc"}
	s, nc := startStreams(t, sc)
	runWorker(t, nc, mesh.WorkerConfig{Stream: sc}, newFake())
	startService(t, nc, nc, mesh.ServiceConfig{Jobs: []string{"svc"}, Version: "1.2.3"})

	caller := meshtest.Connect(t, s)
	request := func(body string) *nats.Msg {
		t.Helper()
		var m *nats.Msg
		meshtest.WaitFor(t, "endpoint", func() bool {
			var err error
			m, err = caller.Request(mesh.PredictSubject("svc"), []byte(body), 10*time.Second)
			return !errors.Is(err, nats.ErrNoResponders)
		})
		if m == nil {
			t.Fatalf("request %q: no reply", body)
		}
		return m
	}
	for _, tc := range []struct {
		body, want, code, errContains string
	}{
		{body: "hello", want: "HELLO"},
		{body: "bad-one", code: "400", errContains: "bad payload"},
		{body: "again", want: "AGAIN"},
	} {
		t.Run(tc.body, func(t *testing.T) {
			m := request(tc.body)
			if got := m.Header.Get("Nats-Service-Error-Code"); got != tc.code {
				t.Errorf("got error code %q, want %q (error %q)", got, tc.code, m.Header.Get("Nats-Service-Error"))
			}
			if tc.code != "" {
				if got := m.Header.Get("Nats-Service-Error"); !strings.Contains(got, tc.errContains) {
					t.Errorf("got error %q, want it to contain %q", got, tc.errContains)
				}
				return
			}
			if got := string(m.Data); got != tc.want {
				t.Errorf("got body %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWorkerShutdownRedelivers(t *testing.T) {
	sc := mesh.StreamConfig{Job: "shut", AckWait: 30 * time.Second}
	s, nc := startStreams(t, sc)
	const n = 10
	stuck := newFake()
	stuck.block = make(chan struct{}) // never released: only ctx ends it
	w1, stop1 := runWorker(t, meshtest.Connect(t, s), mesh.WorkerConfig{Stream: sc, ShutdownGrace: 100 * time.Millisecond}, stuck)
	c := newClient(t, nc)

	results := make(chan error, n)
	for i := range n {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			body := "job-" + strconv.Itoa(i)
			res, err := c.Submit(ctx, "shut", mesh.Request{Body: []byte(body)})
			if err == nil && string(res.Body) != strings.ToUpper(body) {
				err = fmt.Errorf("got body %q, want %q", res.Body, strings.ToUpper(body))
			}
			results <- err
		}()
	}
	meshtest.WaitFor(t, "worker 1 holding every record", func() bool { return stuck.totalCalls() == n })

	fresh := newFake()
	w2, _ := runWorker(t, meshtest.Connect(t, s), mesh.WorkerConfig{Stream: sc}, fresh)
	stop1()
	for range n {
		if err := <-results; err != nil {
			t.Errorf("got %v, want nil", err)
		}
	}
	if got, want := w1.Stats().Processed, uint64(0); got != want {
		t.Errorf("worker 1: got %d processed, want %d", got, want)
	}
	if got, want := w2.Stats().Processed, uint64(n); got != want {
		t.Errorf("worker 2: got %d processed, want %d", got, want)
	}
}

func TestGiveUpAfterMaxDeliver(t *testing.T) {
	sc := mesh.StreamConfig{Job: "giveup", MaxDeliver: 3, Backoff: 10 * time.Millisecond}
	_, nc := startStreams(t, sc)
	fake := newFake()
	w, _ := runWorker(t, nc, mesh.WorkerConfig{Stream: sc}, fake)
	c := newClient(t, nc)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.Submit(ctx, "giveup", mesh.Request{URI: "r1", Body: []byte("fail-1")})
	var me *status.Error
	if !errors.As(err, &me) {
		t.Fatalf("got error %v, want *status.Error", err)
	}
	if got, want := me.Status, 500; got != want {
		t.Errorf("got status %d, want %d", got, want)
	}
	if got, want := res.Status, 500; got != want {
		t.Errorf("got result status %d, want %d", got, want)
	}
	for _, part := range []string{"gave up after 3 deliveries", "model busy"} {
		if !strings.Contains(me.Message, part) {
			t.Errorf("got message %q, want it to contain %q", me.Message, part)
		}
	}
	if got, want := fake.count("fail-1"), 3; got != want {
		t.Errorf("got %d Predict calls, want %d", got, want)
	}
	js := newJS(t, nc)
	meshtest.WaitFor(t, "empty queue", func() bool { return queueLen(t, js, "giveup") == 0 })
	st := w.Stats()
	if got, want := st.Failed, uint64(1); got != want {
		t.Errorf("got %d failed, want %d", got, want)
	}
	if got, want := st.Retried, uint64(2); got != want {
		t.Errorf("got %d retried, want %d", got, want)
	}
}

func TestExpiredDeadlineNotRun(t *testing.T) {
	sc := mesh.StreamConfig{Job: "expire"}
	_, nc := startStreams(t, sc)
	js := newJS(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m := nats.NewMsg(mesh.WorkSubject("expire"))
	m.Data = []byte("expired")
	m.Header.Set(mesh.HeaderDeadline, strconv.FormatInt(time.Now().Add(-time.Second).UnixNano(), 10))
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatalf("PublishMsg: %v", err)
	}
	fake := newFake()
	w, _ := runWorker(t, nc, mesh.WorkerConfig{Stream: sc}, fake)
	if _, err := newClient(t, nc).Submit(ctx, "expire", mesh.Request{Body: []byte("live")}); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	meshtest.WaitFor(t, "expired record dropped", func() bool { return w.Stats().Expired == 1 })
	if got, want := fake.count("expired"), 0; got != want {
		t.Errorf("got %d Predict calls, want %d", got, want)
	}
	meshtest.WaitFor(t, "empty queue", func() bool { return queueLen(t, js, "expire") == 0 })
}

// collectResults runs ConsumeResults and returns a channel of its results.
func collectResults(t *testing.T, nc *nats.Conn, job, durable string) <-chan mesh.Result {
	t.Helper()
	ch := make(chan mesh.Result, 100)
	js := newJS(t, nc)
	meshtest.Run(t, func(ctx context.Context) error {
		return mesh.ConsumeResults(ctx, js, job, durable, mesh.ResultsSubject(job, durable), func(_ context.Context, r mesh.Result) error {
			ch <- r
			return nil
		})
	})
	return ch
}

func TestEnqueueConsumeResults(t *testing.T) {
	sc := mesh.StreamConfig{Job: "durable"}
	_, nc := startStreams(t, sc)
	runWorker(t, nc, mesh.WorkerConfig{Stream: sc}, newFake())
	c := newClient(t, nc)
	got := collectResults(t, nc, "durable", "redis")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	want := map[string]mesh.Result{
		"a": {URI: "a", Body: []byte("ONE"), Status: 200},
		"b": {URI: "b", Status: 400},
	}
	for uri, body := range map[string]string{"a": "one", "b": "bad"} {
		if err := c.Enqueue(ctx, "durable", mesh.Request{URI: uri, Body: []byte(body)}, mesh.ResultsSubject("durable", "redis")); err != nil {
			t.Fatalf("Enqueue %s: %v", uri, err)
		}
	}
	for range want {
		select {
		case r := <-got:
			w, ok := want[r.URI]
			if !ok {
				t.Fatalf("got result for unknown uri %q", r.URI)
			}
			if r.Status != w.Status || string(r.Body) != string(w.Body) {
				t.Errorf("uri %s: got status %d body %q, want %d %q", r.URI, r.Status, r.Body, w.Status, w.Body)
			}
			if r.Status != 200 && r.Message == "" {
				t.Errorf("uri %s: got empty error message, want one", r.URI)
			}
			delete(want, r.URI)
		case <-ctx.Done():
			t.Fatalf("timed out; missing %v", want)
		}
	}
}

func TestDuplicateMsgIDRunsOnce(t *testing.T) {
	sc := mesh.StreamConfig{Job: "dedup"}
	_, nc := startStreams(t, sc)
	fake := newFake()
	runWorker(t, nc, mesh.WorkerConfig{Stream: sc}, fake)
	c := newClient(t, nc)
	got := collectResults(t, nc, "dedup", "door")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := mesh.Request{URI: "x", Body: []byte("once"), MsgID: "id-1"}
	for range 2 {
		if err := c.Enqueue(ctx, "dedup", req, mesh.ResultsSubject("dedup", "door")); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
	}
	if _, err := c.Submit(ctx, "dedup", req); !errors.Is(err, mesh.ErrDuplicate) {
		t.Errorf("Submit: got %v, want ErrDuplicate", err)
	}
	select {
	case r := <-got:
		if string(r.Body) != "ONCE" {
			t.Errorf("got body %q, want %q", r.Body, "ONCE")
		}
	case <-ctx.Done():
		t.Fatal("timed out waiting for the result")
	}
	// A later request proves the worker has moved past any duplicate.
	if _, err := c.Submit(ctx, "dedup", mesh.Request{Body: []byte("later")}); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if got, want := fake.count("once"), 1; got != want {
		t.Errorf("got %d Predict calls, want %d", got, want)
	}
	select {
	case r := <-got:
		t.Errorf("got a second result %+v, want none", r)
	default:
	}
}

func TestQueueFull(t *testing.T) {
	_, nc := startStreams(t, mesh.StreamConfig{Job: "full", MaxMsgs: 2})
	c, ctx, subj := enqueued(t, nc, "full", 2)
	if err := c.Enqueue(ctx, "full", mesh.Request{Body: []byte("x")}, subj); !errors.Is(err, mesh.ErrQueueFull) {
		t.Errorf("Enqueue: got %v, want ErrQueueFull", err)
	}
	_, err := c.Submit(ctx, "full", mesh.Request{Body: []byte("x")})
	if !errors.Is(err, mesh.ErrQueueFull) {
		t.Errorf("Submit: got %v, want ErrQueueFull", err)
	}
	if got := status.Of(err); got != status.Busy {
		t.Errorf("Submit: got status.Of %d, want %d", got, status.Busy)
	}
}

// TestLargeBodies sends a body past the server's max payload, whose
// answer is past it too: it travels beside its message, in BodiesBucket,
// both ways, and comes back whole, on the synchronous path (Submit) and
// the durable one (Enqueue, its result consumed); Submit's objects are
// deleted once it has its answer.
func TestLargeBodies(t *testing.T) {
	s, nc := startStreams(t, mesh.StreamConfig{Job: "big"})
	runWorker(t, meshtest.Connect(t, s), mesh.WorkerConfig{Stream: mesh.StreamConfig{Job: "big"}}, reversePredictor{})
	c := newClient(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body := make([]byte, 3*nc.MaxPayload()/2)
	for i := range body {
		body[i] = byte(i * 7)
	}
	want := slices.Clone(body)
	slices.Reverse(want)
	res, err := c.Submit(ctx, "big", mesh.Request{Body: body})
	if err != nil || !bytes.Equal(res.Body, want) {
		t.Fatalf("Submit: got %d bytes (%v), want the %d reversed", len(res.Body), err, len(want))
	}
	if err := c.Enqueue(ctx, "big", mesh.Request{URI: "u1", Body: body}, mesh.ResultsSubject("big", "door")); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	got := make(chan mesh.Result, 1)
	cctx, stop := context.WithCancel(ctx)
	go func() {
		_ = c.ConsumeResults(cctx, "big", "door", "door", func(_ context.Context, r mesh.Result) error { got <- r; stop(); return nil })
	}()
	select {
	case r := <-got:
		if r.Status != status.OK || !bytes.Equal(r.Body, want) {
			t.Errorf("durable result: status %d, %d bytes, want 200 and the %d reversed", r.Status, len(r.Body), len(want))
		}
	case <-ctx.Done():
		t.Fatal("no durable result")
	}
	js, _ := jetstream.New(nc)
	store, err := js.ObjectStore(ctx, mesh.BodiesBucket)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.WaitFor(t, "Submit's objects deleted", func() bool {
		st, err := store.Status(ctx)
		// The Enqueue's request and result stay until BodiesTTL.
		return err == nil && st.Size() < uint64(4*len(body))
	})
}

// reversePredictor answers the body reversed.
type reversePredictor struct{}

func (reversePredictor) Predict(_ context.Context, _ string, body []byte) ([]byte, error) {
	out := slices.Clone(body)
	slices.Reverse(out)
	return out, nil
}

func TestClosedClientIsBusy(t *testing.T) {
	s := meshtest.StartServer(t)
	c, err := mesh.NewClient(meshtest.Connect(t, s), mesh.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = c.Submit(context.Background(), "closed", mesh.Request{Body: []byte("x")})
	if !errors.Is(err, mesh.ErrClosed) || !errors.Is(err, status.ErrBusy) {
		t.Errorf("Submit after Close: got %v, want mesh.ErrClosed wrapping status.ErrBusy", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"stream ok", mesh.StreamConfig{Job: "a_b-1"}.Validate()},
		{"stream bad job", mesh.StreamConfig{Job: "a.b"}.Validate()},
		{"stream empty job", mesh.StreamConfig{}.Validate()},
		{"stream negative ack wait", mesh.StreamConfig{Job: "j", AckWait: -1}.Validate()},
		{"stream too many partitions", mesh.StreamConfig{Job: "j", Partitions: mesh.MaxPartitions + 1}.Validate()},
		{"stream negative partitions", mesh.StreamConfig{Job: "j", Partitions: -1}.Validate()},
		{"stream partitions ok", mesh.StreamConfig{Job: "j", Partitions: mesh.MaxPartitions}.Validate()},
		{"client negative attempt timeout", mesh.ClientConfig{AttemptTimeout: -1}.Validate()},
		{"worker negative inflight", mesh.WorkerConfig{Stream: mesh.StreamConfig{Job: "j"}, MaxInflight: -1}.Validate()},
		{"client negative timeout", mesh.ClientConfig{Timeout: -1}.Validate()},
		{"service no jobs", mesh.ServiceConfig{}.Validate()},
		{"service twice", mesh.ServiceConfig{Jobs: []string{"a", "a"}}.Validate()},
		{"service ok", mesh.ServiceConfig{Jobs: []string{"a", "b"}}.Validate()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantOK := strings.HasSuffix(tc.name, "ok")
			if got := tc.err == nil; got != wantOK {
				t.Fatalf("got valid=%v (%v), want %v", got, tc.err, wantOK)
			}
			if tc.err != nil && !errors.Is(tc.err, mesh.ErrInvalidConfig) {
				t.Errorf("got %v, want ErrInvalidConfig", tc.err)
			}
		})
	}
}

func TestGiveUpAfterAckWaitExpiries(t *testing.T) {
	s := meshtest.StartServer(t)
	nc := meshtest.Connect(t, s)
	// One attempt; the consumer allows a second delivery so the worker can
	// end the record that its first attempt never settled.
	sc := mesh.StreamConfig{Job: "crash", MaxDeliver: 1, AckWait: 200 * time.Millisecond}
	ensure(t, nc, sc)
	stuck := newFake()
	stuck.block = make(chan struct{})
	runWorker(t, nc, mesh.WorkerConfig{Stream: sc, ShutdownGrace: 50 * time.Millisecond}, stuck)

	// A record without Cs-Deadline (a durable door's) has its attempt
	// bounded by 10 AckWaits: the hung attempt ends and, with no attempt
	// left, the record is answered 500.
	replies, err := nc.SubscribeSync(nats.NewInbox())
	if err != nil {
		t.Fatalf("SubscribeSync: %v", err)
	}
	m := nats.NewMsg(mesh.WorkSubject("crash"))
	m.Data = []byte("hang")
	m.Header.Set(mesh.HeaderReplyTo, replies.Subject)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := newJS(t, nc).PublishMsg(ctx, m); err != nil {
		t.Fatalf("PublishMsg: %v", err)
	}
	reply, err := replies.NextMsgWithContext(ctx)
	if err != nil {
		t.Fatalf("NextMsg: %v", err)
	}
	if got, want := reply.Header.Get(mesh.HeaderStatus), "500"; got != want {
		t.Errorf("got status %q, want %q", got, want)
	}
	if got, want := reply.Header.Get(mesh.HeaderError), "gave up after 1 deliveries"; !strings.Contains(got, want) {
		t.Errorf("got message %q, want it to contain %q", got, want)
	}
	if got, want := stuck.count("hang"), 1; got != want {
		t.Errorf("got %d Predict calls, want %d", got, want)
	}
	meshtest.WaitFor(t, "empty queue", func() bool { return queueLen(t, newJS(t, nc), "crash") == 0 })
}

func TestSlowPredictKeptInProgress(t *testing.T) {
	sc := mesh.StreamConfig{Job: "slow", AckWait: 200 * time.Millisecond}
	_, nc := startStreams(t, sc)
	slow := newFake()
	slow.delay = 700 * time.Millisecond // over three AckWaits
	runWorker(t, nc, mesh.WorkerConfig{Stream: sc}, slow)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := newClient(t, nc).Submit(ctx, "slow", mesh.Request{Body: []byte("s")})
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if got, want := string(res.Body), "S"; got != want {
		t.Errorf("got body %q, want %q", got, want)
	}
	if got, want := slow.count("s"), 1; got != want {
		t.Errorf("got %d Predict calls, want %d (redelivered while in progress)", got, want)
	}
}

func TestServiceBusyAndJobs(t *testing.T) {
	// Job "one" has its stream and a worker; job "two" has neither, so a
	// request for it holds the door's only slot while the door retries the
	// store, until RequestTimeout.
	sc := mesh.StreamConfig{Job: "one"}
	s, nc := startStreams(t, sc)
	runWorker(t, nc, mesh.WorkerConfig{Stream: sc}, newFake())
	startService(t, nc, nc, mesh.ServiceConfig{Jobs: []string{"one", "two"}, MaxConcurrent: 1, RequestTimeout: 10 * time.Second})
	caller := meshtest.Connect(t, s)

	// The micro INFO verb lists one predict endpoint per job.
	var info struct {
		Name      string `json:"name"`
		Endpoints []struct {
			Name     string            `json:"name"`
			Subject  string            `json:"subject"`
			Metadata map[string]string `json:"metadata"`
		} `json:"endpoints"`
	}
	meshtest.WaitFor(t, "service info", func() bool {
		m, err := caller.Request("$SRV.INFO."+mesh.ServiceName, nil, time.Second)
		return err == nil && json.Unmarshal(m.Data, &info) == nil && len(info.Endpoints) == 2
	})
	for i, job := range []string{"one", "two"} {
		e := info.Endpoints[i]
		if e.Name != mesh.EndpointName || e.Subject != mesh.PredictSubject(job) || e.Metadata[mesh.MetadataJob] != job {
			t.Errorf("endpoint %d: got %s %s %v, want %s %s job=%s", i, e.Name, e.Subject, e.Metadata, mesh.EndpointName, mesh.PredictSubject(job), job)
		}
	}
	if m, err := caller.Request(mesh.PredictSubject("one"), []byte("free"), 10*time.Second); err != nil || string(m.Data) != "FREE" {
		t.Fatalf("request with the slot free: got %v, %v; want FREE", m, err)
	}

	stuck := make(chan *nats.Msg, 1)
	go func() {
		// Refused busy only while a request for "one" is being stored:
		// ask again until the slot is this request's.
		for {
			m, err := caller.Request(mesh.PredictSubject("two"), []byte("nowhere"), 20*time.Second)
			if err != nil {
				t.Errorf("request for a job without a stream: %v", err)
			}
			if err != nil || !strings.Contains(m.Header.Get("Nats-Service-Error"), "busy") {
				stuck <- m
				return
			}
		}
	}()
	// Ask "one" until the door refuses it: once "two" has the slot it
	// holds it for the whole RequestTimeout.
	var last string
	for deadline := time.Now().Add(8 * time.Second); ; {
		m, err := caller.Request(mesh.PredictSubject("one"), []byte("next"), 5*time.Second)
		if err == nil && m.Header.Get("Nats-Service-Error-Code") == "503" && strings.Contains(m.Header.Get("Nats-Service-Error"), "busy") {
			break
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("code %q error %q body %q", m.Header.Get("Nats-Service-Error-Code"), m.Header.Get("Nats-Service-Error"), m.Data)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 503 busy while the only slot is taken; last answer: %s", last)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if m := <-stuck; m == nil || m.Header.Get("Nats-Service-Error-Code") != "503" || !strings.Contains(m.Header.Get("Nats-Service-Error"), "unavailable") {
		t.Errorf("request for a job without a stream: got %v, want a 503 saying the queue is unavailable once RequestTimeout passed", m)
	}
}

// panicPredictor panics on a body starting with "panic" and echoes the
// others upper-cased.
type panicPredictor struct{}

func (panicPredictor) Predict(_ context.Context, _ string, body []byte) ([]byte, error) {
	if strings.HasPrefix(string(body), "panic") {
		panic("predictor bug")
	}
	return []byte(strings.ToUpper(string(body))), nil
}

// TestWorkerRecoversPanic checks that a Predictor panic fails that one
// record with status 500 and the worker serves the next.
func TestWorkerRecoversPanic(t *testing.T) {
	sc := mesh.StreamConfig{Job: "panics", MaxDeliver: 2, Backoff: 10 * time.Millisecond}
	_, nc := startStreams(t, sc)
	runWorker(t, nc, mesh.WorkerConfig{Stream: sc}, panicPredictor{})
	c := newClient(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	_, err := c.Submit(ctx, "panics", mesh.Request{URI: "r1", Body: []byte("panic-1")})
	var me *status.Error
	if !errors.As(err, &me) || me.Status != 500 || !strings.Contains(me.Message, "predictor bug") {
		t.Fatalf("got error %v, want a 500 *status.Error naming the panic", err)
	}
	res, err := c.Submit(ctx, "panics", mesh.Request{URI: "r2", Body: []byte("next")})
	if err != nil {
		t.Fatalf("next request: %v", err)
	}
	if got, want := string(res.Body), "NEXT"; got != want {
		t.Errorf("got body %q, want %q", got, want)
	}
}

// unanswerablePredictor counts its calls and fails each one as a codec
// does that cannot write the outputs (status.ErrUnanswerable).
type unanswerablePredictor struct{ calls chan struct{} }

func (p unanswerablePredictor) Predict(context.Context, string, []byte) ([]byte, error) {
	p.calls <- struct{}{}
	return nil, fmt.Errorf("output %q: %w", "y", status.ErrUnanswerable)
}

// TestWorkerAnswersUnanswerableAtOnce checks that outputs no try can
// write are a 500 at the first delivery, not after MaxDeliver retries.
func TestWorkerAnswersUnanswerableAtOnce(t *testing.T) {
	sc := mesh.StreamConfig{Job: "unanswerable", MaxDeliver: 5, Backoff: 10 * time.Millisecond}
	_, nc := startStreams(t, sc)
	p := unanswerablePredictor{calls: make(chan struct{}, 10)}
	runWorker(t, nc, mesh.WorkerConfig{Stream: sc}, p)
	c := newClient(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := c.Submit(ctx, "unanswerable", mesh.Request{URI: "r1", Body: []byte("x")})
	var me *status.Error
	if !errors.As(err, &me) || me.Status != 500 || strings.Contains(me.Message, "gave up") {
		t.Fatalf("got error %v, want a 500 *status.Error at the first delivery", err)
	}
	if n := len(p.calls); n != 1 {
		t.Errorf("Predict ran %d times, want 1", n)
	}
}

// TestServiceStatsCountForwardsAndRefusals: the door forwards a request to
// the work queue and the worker answers the caller (Client.Forward), so
// $SRV.STATS count each request the door took, when it is stored or
// refused; the door's refusals (here a publish without a reply subject)
// count in num_errors and last_error. An error the worker answers (a bad
// body: 400) reaches the caller as a micro error reply all the same.
func TestServiceStatsCountForwardsAndRefusals(t *testing.T) {
	sc := mesh.StreamConfig{Job: "stats"}
	s, nc := startStreams(t, sc)
	runWorker(t, nc, mesh.WorkerConfig{Stream: sc}, newFake())
	svc := startService(t, nc, nc, mesh.ServiceConfig{Jobs: []string{"stats"}})
	caller := meshtest.Connect(t, s)
	meshtest.WaitFor(t, "the door", func() bool { return svc.ID() != "" })

	if m, err := caller.Request(mesh.PredictSubject("stats"), []byte("good"), 10*time.Second); err != nil || string(m.Data) != "GOOD" || len(m.Header) != 0 {
		t.Fatalf("good request: got %v, %v; want GOOD and no headers", m, err)
	}
	m, err := caller.Request(mesh.PredictSubject("stats"), []byte("bad body"), 10*time.Second)
	if err != nil || m.Header.Get(micro.ErrorCodeHeader) != "400" || !strings.Contains(m.Header.Get(micro.ErrorHeader), "bad payload") || len(m.Data) != 0 {
		t.Fatalf("bad request: got %v, %v; want a 400 error reply saying bad payload", m, err)
	}
	if err := caller.Publish(mesh.PredictSubject("stats"), []byte("no reply")); err != nil {
		t.Fatal(err)
	}

	for _, subj := range []string{"$SRV.STATS." + mesh.ServiceName, "$SRV.STATS." + mesh.ServiceName + "." + svc.ID()} {
		var e *micro.EndpointStats
		meshtest.WaitFor(t, subj+" counting 3 requests", func() bool {
			m, err = caller.Request(subj, nil, 5*time.Second)
			if err != nil {
				t.Fatalf("%s: %v", subj, err)
			}
			var st micro.Stats
			if err := json.Unmarshal(m.Data, &st); err != nil || st.Type != micro.StatsResponseType || len(st.Endpoints) != 1 {
				t.Fatalf("%s: got %s (%v), want micro stats of one endpoint", subj, m.Data, err)
			}
			e = st.Endpoints[0]
			return e.NumRequests >= 3
		})
		if e.Name != mesh.EndpointName || e.NumRequests != 3 || e.NumErrors != 1 {
			t.Errorf("%s: got %s %d requests %d errors, want %s 3 requests 1 error", subj, e.Name, e.NumRequests, e.NumErrors, mesh.EndpointName)
		}
		if !strings.HasPrefix(e.LastError, "400:") || !strings.Contains(e.LastError, "no reply subject") {
			t.Errorf("%s: last_error %q, want 400:<no reply subject>", subj, e.LastError)
		}
		if e.ProcessingTime <= 0 || e.AverageProcessingTime <= 0 {
			t.Errorf("%s: processing time %v (average %v), want both above 0", subj, e.ProcessingTime, e.AverageProcessingTime)
		}
	}

	// PING and INFO answer as micro's do.
	m, err = caller.Request("$SRV.PING."+mesh.ServiceName+"."+svc.ID(), nil, 5*time.Second)
	var ping micro.Ping
	if err != nil || json.Unmarshal(m.Data, &ping) != nil || ping.Type != micro.PingResponseType || ping.ID != svc.ID() || ping.Name != mesh.ServiceName {
		t.Errorf("PING: got %v, %v; want a micro ping of %s", m, err, svc.ID())
	}
	m, err = caller.Request("$SRV.INFO."+mesh.ServiceName, nil, 5*time.Second)
	var info micro.Info
	if err != nil || json.Unmarshal(m.Data, &info) != nil || info.Type != micro.InfoResponseType || len(info.Endpoints) != 1 ||
		info.Endpoints[0].QueueGroup != mesh.ServiceQueueGroup || info.Endpoints[0].Subject != mesh.PredictSubject("stats") {
		t.Errorf("INFO: got %v, %v; want micro info with the predict endpoint", m, err)
	}
}

// TestCoalescedBatchAnswersEachCallerOnce fires a burst of NATS door
// requests at once, so that the door coalesces them (coalesce.go): each
// caller gets its own answer exactly once (200, a 400 for a bad record,
// a 500 once the retried ones give up), the retried requests of a batch
// whose others were answered run MaxDeliver times in all, and the queue
// stored fewer messages than requests.
func TestCoalescedBatchAnswersEachCallerOnce(t *testing.T) {
	fake, sc := newFake(), mesh.StreamConfig{Job: "coalesce", MaxDeliver: 3, Backoff: 10 * time.Millisecond}
	s, nc := startStreams(t, sc)
	w, _ := runWorker(t, nc, mesh.WorkerConfig{Stream: sc}, fake)
	startService(t, meshtest.Connect(t, s), meshtest.Connect(t, s), mesh.ServiceConfig{Jobs: []string{"coalesce"}})
	caller := meshtest.Connect(t, s)
	meshtest.WaitFor(t, "endpoint", func() bool {
		_, err := caller.Request(mesh.PredictSubject("coalesce"), []byte("warm"), 10*time.Second)
		return err == nil
	})
	replies := make(chan *nats.Msg, 4096)
	if _, err := caller.ChanSubscribe("answers.>", replies); err != nil {
		t.Fatal(err)
	}
	const n = 600
	body := func(i int) string {
		switch i % 100 {
		case 7:
			return fmt.Sprintf("bad-%d", i)
		case 42:
			return fmt.Sprintf("fail-%d", i)
		}
		return fmt.Sprintf("r-%d", i)
	}
	for i := range n {
		m := &nats.Msg{Subject: mesh.PredictSubject("coalesce"), Reply: fmt.Sprintf("answers.%d", i), Data: []byte(body(i))}
		if err := caller.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	got := map[int]int{}
	deadline := time.After(30 * time.Second)
	for len(got) < n {
		select {
		case m := <-replies:
			i, _ := strconv.Atoi(strings.TrimPrefix(m.Subject, "answers."))
			got[i]++
			checkCoalescedAnswer(t, i, body(i), m)
		case <-deadline:
			t.Fatalf("%d of %d callers answered", len(got), n)
		}
	}
	time.Sleep(500 * time.Millisecond) // a second answer would come now
	for len(replies) > 0 {
		m := <-replies
		i, _ := strconv.Atoi(strings.TrimPrefix(m.Subject, "answers."))
		got[i]++
	}
	for i, c := range got {
		if c != 1 {
			t.Errorf("caller %d (%s) answered %d times, want once", i, body(i), c)
		}
	}
	if got, want := fake.count("fail-42"), 3; got != want {
		t.Errorf("fail-42 ran %d times, want MaxDeliver %d", got, want)
	}
	// 6 always-busy requests, each handed back twice; 6 of them and 6 bad
	// ones failed; the rest and the warm-up answered.
	if st := w.Stats(); st.Retried != 12 || st.Failed != 12 || st.Processed != n-12+1 {
		t.Errorf("worker stats: retried %d, failed %d, processed %d; want 12, 12, %d", st.Retried, st.Failed, st.Processed, n-12+1)
	}
	info, err := newJS(t, nc).Stream(context.Background(), mesh.StreamName("coalesce"))
	if err != nil {
		t.Fatal(err)
	}
	if seq := info.CachedInfo().State.LastSeq; seq >= n {
		t.Errorf("stored %d messages for %d requests (and their retries), want fewer: nothing coalesced", seq, n)
	} else {
		t.Logf("stored %d messages for %d requests (retries included)", seq, n)
	}
}

func checkCoalescedAnswer(t *testing.T, i int, body string, m *nats.Msg) {
	t.Helper()
	code := m.Header.Get("Nats-Service-Error-Code")
	switch {
	case strings.HasPrefix(body, "bad"):
		if code != "400" {
			t.Errorf("caller %d (%s): got code %q, want 400", i, body, code)
		}
	case strings.HasPrefix(body, "fail"):
		if code != "500" || !strings.Contains(m.Header.Get("Nats-Service-Error"), "gave up after 3 deliveries") {
			t.Errorf("caller %d (%s): got code %q %q, want 500 gave up after 3 deliveries", i, body, code, m.Header.Get("Nats-Service-Error"))
		}
	case code != "" || string(m.Data) != strings.ToUpper(body):
		t.Errorf("caller %d: got %q (code %q), want %q", i, m.Data, code, strings.ToUpper(body))
	}
}

// TestNoStorageFailsFast fills a server whose JetStream may use 1 MiB of
// file storage: the request that finds no room gets ErrNoStorage, a 503
// (status.Busy), long before its deadline, not ErrUnavailable after it.
func TestNoStorageFailsFast(t *testing.T) {
	s := meshtest.StartServerWith(t, "jetstream { max_file: 1MB }\n")
	nc := meshtest.Connect(t, s)
	ensure(t, nc, mesh.StreamConfig{Job: "disk", MaxBytes: -1})
	c := newClient(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	body := make([]byte, 64<<10)
	subj := mesh.ResultsSubject("disk", "door")
	var err error
	for i := range 64 {
		err = c.Enqueue(ctx, "disk", mesh.Request{Body: body}, subj)
		if err != nil {
			t.Logf("request %d (%d KiB stored before it): %v", i, i*64, err)
			break
		}
	}
	if !errors.Is(err, mesh.ErrNoStorage) || status.Of(err) != status.Busy {
		t.Fatalf("got %v, want ErrNoStorage (503)", err)
	}
	if ctx.Err() != nil {
		t.Errorf("the refusal waited out the deadline")
	}
}
