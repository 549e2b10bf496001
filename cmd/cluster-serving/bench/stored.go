package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
	var conns []*nats.Conn
	var stops []func()
	closeAll := func() {
		for _, stop := range stops {
			stop()
		}
		for _, nc := range conns {
			nc.Close()
		}
	}
	connect := func() (*nats.Conn, jetstream.JetStream, error) {
		nc, err := nats.Connect(url)
		if err != nil {
			return nil, nil, err
		}
		conns = append(conns, nc)
		js, err := jetstream.New(nc)
		return nc, js, err
	}
	doorNC, doorJS, err := connect()
	if err != nil {
		closeAll()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Limits retention with old messages dropped as new ones come: no
	// per-message delete on the ack, as the mesh's purged limits stream.
	s, err := doorJS.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: storedStream, Subjects: []string{storedWork}, Storage: jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy, MaxMsgs: 100_000, Discard: jetstream.DiscardOld,
	})
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("stored responder: stream: %w", err)
	}
	_, err = s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "trivial", AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("stored responder: consumer: %w", err)
	}
	workerNC, workerJS, err := connect()
	if err != nil {
		closeAll()
		return nil, err
	}
	wcons, err := workerJS.Consumer(ctx, storedStream, "trivial")
	if err != nil {
		closeAll()
		return nil, err
	}
	cc, err := wcons.Consume(func(m jetstream.Msg) {
		_ = workerNC.Publish(m.Headers().Get(storedReplyTo), m.Data())
		_ = m.Ack()
	}, jetstream.PullMaxMessages(64))
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("stored responder: consume: %w", err)
	}
	stops = append(stops, cc.Stop)
	sub, err := doorNC.QueueSubscribe(storedSubject, "q", func(req *nats.Msg) {
		go func() {
			m := nats.NewMsg(storedWork)
			m.Data = req.Data
			m.Header.Set(storedReplyTo, req.Reply)
			pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := doorJS.PublishMsg(pctx, m); err != nil {
				e := nats.NewMsg(req.Reply)
				e.Header.Set("Nats-Service-Error-Code", "503")
				e.Header.Set("Nats-Service-Error", err.Error())
				_ = doorNC.PublishMsg(e)
			}
		}()
	})
	if err != nil {
		closeAll()
		return nil, err
	}
	if err := doorNC.Flush(); err != nil {
		closeAll()
		return nil, err
	}
	// The stream stays: it lives and dies with the serving process's store.
	stops = append(stops, func() { _ = sub.Unsubscribe() })
	return closeAll, nil
}
