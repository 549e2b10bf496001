package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// Names of the stored trivial responder's parts on the serving process's
// NATS server; none of them is the mesh's.
const (
	storedSubject = "bench.stored"
	storedWork    = "bench.stored.work"
	storedStream  = "BENCH_STORED"
	storedReplyTo = "Bench-Reply-To"
)

// storedResponder is the trivial responder with the mesh's architecture and
// none of its code: a door (a queue subscriber on storedSubject) stores
// each request in a JetStream stream on the file store, with the caller's
// reply subject in a header, and answers only when the store fails; a
// pull consumer in another connection takes it, answers the caller
// directly with the request's own bytes and acks. Nothing decodes, runs a
// model, records a metric or a span. Its rate and latency beside the plain
// trivial responder's are what a stored request costs on this server, the
// ceiling of the NATS door's ratios to the trivial responder. It runs in
// the bench process, so its CPU counts as the bench's.
func storedResponder(url string) (func(), error) {
	var cs cleanups
	if err := storedParts(url, &cs); err != nil {
		cs.run()
		return nil, err
	}
	return cs.run, nil
}

// storedParts starts storedResponder's stream, consumer, worker and door,
// adding what closes them to cs.
func storedParts(url string, cs *cleanups) error {
	connect := func() (*nats.Conn, jetstream.JetStream, error) {
		nc, err := nats.Connect(url)
		if err != nil {
			return nil, nil, err
		}
		cs.add(nc.Close)
		js, err := jetstream.New(nc)
		return nc, js, err
	}
	doorNC, doorJS, err := connect()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := storedStreamAndConsumer(ctx, doorJS); err != nil {
		return err
	}
	workerNC, workerJS, err := connect()
	if err != nil {
		return err
	}
	wcons, err := workerJS.Consumer(ctx, storedStream, "trivial")
	if err != nil {
		return err
	}
	cc, err := wcons.Consume(func(m jetstream.Msg) {
		_ = workerNC.Publish(m.Headers().Get(storedReplyTo), m.Data())
		_ = m.Ack()
	}, jetstream.PullMaxMessages(64))
	if err != nil {
		return fmt.Errorf("stored responder: consume: %w", err)
	}
	cs.add(cc.Stop)
	sub, err := doorNC.QueueSubscribe(storedSubject, "q", func(req *nats.Msg) { go storeRequest(doorNC, doorJS, req) })
	if err != nil {
		return err
	}
	// The stream stays: it lives and dies with the serving process's store.
	cs.add(func() { _ = sub.Unsubscribe() })
	return doorNC.Flush()
}

// storedStreamAndConsumer creates storedResponder's stream and its durable
// consumer. Limits retention with old messages dropped as new ones come:
// no per-message delete on the ack, as the mesh's purged limits stream.
func storedStreamAndConsumer(ctx context.Context, js jetstream.JetStream) error {
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: storedStream, Subjects: []string{storedWork}, Storage: jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy, MaxMsgs: 100_000, Discard: jetstream.DiscardOld,
	})
	if err != nil {
		return fmt.Errorf("stored responder: stream: %w", err)
	}
	_, err = s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "trivial", AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return fmt.Errorf("stored responder: consumer: %w", err)
	}
	return nil
}

// storeRequest is storedResponder's door for one request: it stores req
// with its reply subject in a header, and answers the caller only when
// the store fails.
func storeRequest(nc *nats.Conn, js jetstream.JetStream, req *nats.Msg) {
	m := nats.NewMsg(storedWork)
	m.Data = req.Data
	m.Header.Set(storedReplyTo, req.Reply)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(ctx, m); err != nil {
		e := nats.NewMsg(req.Reply)
		e.Header.Set("Nats-Service-Error-Code", "503")
		e.Header.Set("Nats-Service-Error", err.Error())
		_ = nc.PublishMsg(e)
	}
}

// storedHTTPDoor is storedResponder's door over HTTP, for the same stream
// and consumer (start storedResponder first): a net/http handler stores
// the body with a reply subject under its own inbox, waits for the
// consumer's answer there and writes it back. Beside storedResponder's
// NATS door it measures what HTTP costs in place of a NATS request when
// the door, unlike the NATS one, must stay on the way back: the ceiling
// of the HTTP door ÷ NATS door ratio. It returns the URL to POST to.
func storedHTTPDoor(url string) (string, func(), error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return "", nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return "", nil, err
	}
	prefix := nc.NewInbox()
	var mu sync.Mutex
	pending := map[string]chan []byte{}
	sub, err := nc.Subscribe(prefix+".*", func(m *nats.Msg) {
		id := strings.TrimPrefix(m.Subject, prefix+".")
		mu.Lock()
		ch := pending[id]
		delete(pending, id)
		mu.Unlock()
		if ch != nil {
			ch <- m.Data
		}
	})
	if err != nil {
		nc.Close()
		return "", nil, err
	}
	_ = sub.SetPendingLimits(-1, -1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id := nuid.Next()
		ch := make(chan []byte, 1)
		mu.Lock()
		pending[id] = ch
		mu.Unlock()
		defer func() {
			mu.Lock()
			delete(pending, id)
			mu.Unlock()
		}()
		m := nats.NewMsg(storedWork)
		m.Data = body
		m.Header.Set(storedReplyTo, prefix+"."+id)
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		if _, err := js.PublishMsg(ctx, m); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		select {
		case b := <-ch:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(b)
		case <-ctx.Done():
			http.Error(w, "no answer", http.StatusGatewayTimeout)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		nc.Close()
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/", func() { _ = srv.Close(); nc.Close() }, nil
}
