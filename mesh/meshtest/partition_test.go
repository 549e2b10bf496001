package meshtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

const (
	partStream  = "PART"
	partSubject = "part.x"
	// partitionFor is how long the stream leader stays cut off at least:
	// longer than an election (4-9 s), and about as long as an isolated
	// leader takes to notice it lost its quorum (10 s), so that the old
	// leader may still believe it leads when the new one is elected.
	partitionFor = 10 * time.Second
)

// TestIsolatedStreamLeaderLosesNoAckedPublish cuts the leader of an R3
// stream off from its peers (its routes blackholed, as in a network
// partition; the process keeps running) while a client on a majority
// server publishes: the publishes are acked again once the majority has
// elected a new leader, and once the partition heals every acked message
// is readable, from the new leader and from the formerly isolated one.
func TestIsolatedStreamLeaderLosesNoAckedPublish(t *testing.T) {
	cl := meshtest.StartClusterWith(t, meshtest.ClusterConfig{RoutePing: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	js := newJS(t, cl.Connect(t))
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: partStream, Subjects: []string{"part.>"}, Replicas: 3}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	old := settled(t, ctx, js)
	li := cl.Index(old)
	// The publisher and the test's own requests go through a server of
	// the majority, which the partition leaves with a quorum.
	majority := (li + 1) % 3
	admin := cl.ConnectTo(t, majority)
	ajs := newJS(t, admin)
	var p publisher
	pjs := newJS(t, cl.ConnectTo(t, majority))
	stop := meshtest.Run(t, func(ctx context.Context) error { p.run(ctx, pjs); return nil })
	meshtest.WaitFor(t, "acks before the partition", func() bool { return p.count(func(r pub) bool { return r.seq > 0 }) >= 50 })

	cut := time.Now()
	heal := cl.Isolate(li)
	meshtest.WaitFor(t, "an ack from a new leader", func() bool {
		return p.count(func(r pub) bool { return r.seq > 0 && r.begin.After(cut) }) > 0
	})
	resumed := time.Since(cut)
	time.Sleep(partitionFor - resumed) // a no-op when the election took longer
	elected := leaderOf(ctx, ajs)
	heal()
	healed := time.Now()
	settled(t, ctx, ajs)
	caughtUp := time.Since(healed)
	// Publish on a while after the heal, into the stream the old leader
	// has rejoined.
	time.Sleep(2 * time.Second)
	stop()

	pubs := p.snapshot()
	t.Logf("stream leader %s isolated for %v; leader %s elected, first new ack %v after the cut; every replica current %v after the heal",
		old, healed.Sub(cut).Round(time.Millisecond), elected, resumed.Round(time.Millisecond), caughtUp.Round(time.Millisecond))
	report(t, ctx, ajs, pubs, cut, healed)
	checkAcked(t, ctx, ajs, pubs, "the leader after the heal, "+leaderOf(ctx, ajs)+",")
	lead(t, ctx, admin, ajs, old)
	checkAcked(t, ctx, ajs, pubs, "the formerly isolated server "+old)
}

// pub is one publish: its payload, when it began and ended, and its
// acked sequence (0 when it failed).
type pub struct {
	data       string
	begin, end time.Time
	seq        uint64
	err        error
}

// publisher publishes numbered messages one after another, each with a
// one-second deadline, and keeps every outcome. It is safe for concurrent
// use.
type publisher struct {
	mu   sync.Mutex
	pubs []pub
}

// run publishes until ctx ends, about every 10ms.
func (p *publisher) run(ctx context.Context, js jetstream.JetStream) {
	for i := 0; ; i++ {
		r := pub{data: fmt.Sprintf("m-%d", i), begin: time.Now()}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		ack, err := js.Publish(pctx, partSubject, []byte(r.data))
		cancel()
		if ctx.Err() != nil {
			return // stopped: this one's outcome says nothing
		}
		r.end, r.err = time.Now(), err
		if err == nil {
			r.seq = ack.Sequence
		}
		p.mu.Lock()
		p.pubs = append(p.pubs, r)
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// count returns how many publishes so far match.
func (p *publisher) count(match func(pub) bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.pubs {
		if match(r) {
			n++
		}
	}
	return n
}

// snapshot returns a copy of the outcomes so far.
func (p *publisher) snapshot() []pub {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.pubs)
}

func newJS(tb testing.TB, nc *nats.Conn) jetstream.JetStream {
	tb.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return js
}

// leaderOf returns the stream's leader as js sees it, or "" when it
// cannot tell.
func leaderOf(ctx context.Context, js jetstream.JetStream) string {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	s, err := js.Stream(ctx, partStream)
	if err != nil || s.CachedInfo().Cluster == nil {
		return ""
	}
	return s.CachedInfo().Cluster.Leader
}

// settled waits until the stream has a leader and both other replicas
// are current, and returns the leader.
func settled(tb testing.TB, ctx context.Context, js jetstream.JetStream) string {
	tb.Helper()
	var leader string
	meshtest.WaitFor(tb, "a stream leader with every replica current", func() bool {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		s, err := js.Stream(ctx, partStream)
		if err != nil {
			return false
		}
		ci := s.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" || len(ci.Replicas) != 2 {
			return false
		}
		for _, r := range ci.Replicas {
			if !r.Current || r.Offline || r.Lag > 0 {
				return false
			}
		}
		leader = ci.Leader
		return true
	})
	return leader
}

// report logs the publishes' outcomes around the partition: the longest
// time between two acks (the leader change), how many were acked before,
// during and after it, how many failed, and how many of those the stream
// kept anyway (a failed publish may or may not be stored).
func report(tb testing.TB, ctx context.Context, js jetstream.JetStream, pubs []pub, cut, healed time.Time) {
	tb.Helper()
	var acked []time.Time
	var before, during, after, failed int
	var firstErr error
	for _, r := range pubs {
		switch {
		case r.seq == 0:
			failed++
			if firstErr == nil {
				firstErr = r.err
			}
			continue
		case r.end.Before(cut):
			before++
		case r.end.Before(healed):
			during++
		default:
			after++
		}
		acked = append(acked, r.end)
	}
	slices.SortFunc(acked, time.Time.Compare)
	var gap, at time.Duration
	for i := 1; i < len(acked); i++ {
		if d := acked[i].Sub(acked[i-1]); d > gap {
			gap, at = d, acked[i-1].Sub(cut)
		}
	}
	tb.Logf("longest time without an ack: %v, starting %v from the cut (the last ack before it)", gap.Round(time.Millisecond), at.Round(time.Millisecond))
	tb.Logf("publishes: %d; acked %d before the partition, %d during it, %d after the heal; %d failed (first: %v)",
		len(pubs), before, during, after, failed, firstErr)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if s, err := js.Stream(ctx, partStream); err == nil {
		st := s.CachedInfo().State
		tb.Logf("stream: %d messages, sequences %d-%d: %d failed publishes stored anyway",
			st.Msgs, st.FirstSeq, st.LastSeq, int(st.Msgs)-before-during-after)
	}
}

// checkAcked reads every acked publish back by its sequence, from the
// stream's leader (named by who), and fails tb for any that is missing or
// holds another payload.
func checkAcked(tb testing.TB, ctx context.Context, js jetstream.JetStream, pubs []pub, who string) {
	tb.Helper()
	s, err := js.Stream(ctx, partStream)
	if err != nil {
		tb.Fatalf("stream: %v", err)
	}
	begin := time.Now()
	read, lost, retries := 0, 0, 0
	var transient error
	for _, r := range pubs {
		if r.seq == 0 {
			continue
		}
		msg, again, err := getMsg(ctx, s, r.seq)
		if retries += len(again); transient == nil && len(again) > 0 {
			transient = again[0]
		}
		if err == nil && string(msg.Data) != r.data {
			err = fmt.Errorf("got %q, want %q", msg.Data, r.data)
		}
		if err != nil {
			if lost++; lost <= 5 {
				tb.Errorf("acked sequence %d, from %s: %v", r.seq, who, err)
			}
			continue
		}
		read++
	}
	tb.Logf("read back from %s in %v: %d acked messages intact, %d lost; %d reads tried again (first for: %v)",
		who, time.Since(begin).Round(time.Millisecond), read, lost, retries, transient)
	if lost > 5 {
		tb.Errorf("%d acked messages lost in all", lost)
	}
}

// getMsg reads sequence seq, trying again (every 100ms, for up to 30 s)
// on any error but ErrMsgNotFound: after a heal, JetStream can answer 503
// (temporarily unavailable) for a few seconds. It returns the errors it
// tried again after.
func getMsg(ctx context.Context, s jetstream.Stream, seq uint64) (*jetstream.RawStreamMsg, []error, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var again []error
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		msg, err := s.GetMsg(rctx, seq)
		rcancel()
		if err == nil || errors.Is(err, jetstream.ErrMsgNotFound) || ctx.Err() != nil {
			return msg, again, err
		}
		again = append(again, err)
		select {
		case <-ctx.Done():
			return nil, again, fmt.Errorf("get: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// lead makes server name the stream's leader, asking the current one to
// step down in its favour until it is.
func lead(tb testing.TB, ctx context.Context, nc *nats.Conn, js jetstream.JetStream, name string) {
	tb.Helper()
	req := fmt.Appendf(nil, `{"placement":{"preferred":%q}}`, name)
	var asked time.Time
	meshtest.WaitFor(tb, name+" leading the stream", func() bool {
		if leaderOf(ctx, js) == name {
			return true
		}
		if time.Since(asked) < 2*time.Second {
			return false // the last request's election may still be running
		}
		asked = time.Now()
		msg, err := nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+partStream, req, time.Second)
		if err == nil {
			var resp struct {
				Error *jetstream.APIError `json:"error"`
			}
			if json.Unmarshal(msg.Data, &resp) == nil && resp.Error != nil {
				tb.Logf("step down in favour of %s: %v", name, resp.Error)
			}
		}
		return false
	})
}
