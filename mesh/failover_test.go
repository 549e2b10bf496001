package mesh_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// TestFailoverOnCluster kills the server that leads partition 0 of a job
// on a 3-node cluster (replicas 3), under a steady trickle of Submits and
// Enqueues, and checks that every request is answered, none with an
// error, and every durable result written exactly once. It logs the
// longest gap between answers: with one partition the doors wait for the
// election (4-9 s); with three they go on within about one attempt
// timeout. Timing is logged, not asserted.
func TestFailoverOnCluster(t *testing.T) {
	for _, parts := range []int{1, 3} {
		t.Run(fmt.Sprintf("partitions=%d", parts), func(t *testing.T) { failover(t, parts) })
	}
}

// trickle records when each answer of one door came.
type trickle struct {
	mu      sync.Mutex
	answers []time.Time
	errs    []string
}

func (tr *trickle) answer(err error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if err != nil {
		tr.errs = append(tr.errs, fmt.Sprintf("%v (status %d)", err, status.Of(err)))
		return
	}
	tr.answers = append(tr.answers, time.Now())
}

// longestGap returns the longest time between consecutive answers, and
// when it began relative to kill.
func (tr *trickle) longestGap(kill time.Time) (time.Duration, time.Duration) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	a := slices.Clone(tr.answers)
	slices.SortFunc(a, time.Time.Compare)
	var gap, at time.Duration
	for i := 1; i < len(a); i++ {
		if d := a[i].Sub(a[i-1]); d > gap {
			gap, at = d, a[i-1].Sub(kill)
		}
	}
	return gap, at
}

func failover(t *testing.T, parts int) {
	cl := meshtest.StartCluster(t, 3)
	job := "fo"
	sc := mesh.StreamConfig{Job: job, Replicas: 3, Partitions: parts, AckWait: 3 * time.Second}
	admin := cl.Connect(t)
	ensure(t, admin, sc)
	js := newJS(t, admin)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var leaders []string
	meshtest.WaitFor(t, "distinct partition leaders", func() bool {
		leaders = streamLeaders(ctx, js, job, parts)
		return !slices.Contains(leaders, "") && len(slices.Compact(slices.Sorted(slices.Values(leaders)))) == parts
	})
	t.Logf("partition leaders: %v", leaders)

	fake := newFake()
	for range 2 {
		runWorker(t, cl.Connect(t), mesh.WorkerConfig{Stream: sc}, fake)
	}
	c := newClient(t, cl.Connect(t))
	written := collectCounts(t, cl.Connect(t), job)

	var submits, enqueues trickle
	var wg sync.WaitGroup
	sent := 0
	var kill time.Time
	for start := time.Now(); time.Since(start) < 12*time.Second; sent++ {
		if kill.IsZero() && time.Since(start) > 2*time.Second {
			kill = time.Now()
			cl.Kill(cl.Index(leaders[0]))
		}
		wg.Add(2)
		go func(i int) {
			defer wg.Done()
			body := fmt.Sprintf("s-%d", i)
			res, err := c.Submit(ctx, job, mesh.Request{Body: []byte(body)})
			if err == nil && string(res.Body) != strings.ToUpper(body) {
				err = fmt.Errorf("got body %q, want %q", res.Body, strings.ToUpper(body))
			}
			submits.answer(err)
		}(sent)
		go func(i int) {
			defer wg.Done()
			id := fmt.Sprintf("e-%d", i)
			enqueues.answer(c.Enqueue(ctx, job, mesh.Request{URI: id, Body: []byte(id), MsgID: id}, mesh.ResultsSubject(job, "door")))
		}(sent)
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	meshtest.WaitFor(t, "every durable result", func() bool { return written.distinct() == sent })
	// A record whose ack died with the leader runs again after AckWait:
	// wait for such late copies before counting.
	time.Sleep(sc.AckWait + 2*time.Second)

	for name, tr := range map[string]*trickle{"Submit": &submits, "Enqueue": &enqueues} {
		if len(tr.errs) > 0 {
			t.Errorf("%s: got %d errors, want none; first: %s", name, len(tr.errs), tr.errs[0])
		}
		gap, at := tr.longestGap(kill)
		t.Logf("%s: %d of %d answered; longest gap %v, from %v after the kill", name, len(tr.answers), sent, gap.Round(time.Millisecond), at.Round(time.Millisecond))
	}
	gap, at := written.longestGap(kill)
	t.Logf("results: %d written; longest gap %v, from %v after the kill", written.distinct(), gap.Round(time.Millisecond), at.Round(time.Millisecond))
	for i := range sent {
		if id := fmt.Sprintf("e-%d", i); written.count(id) != 1 {
			t.Errorf("result %s: written %d times, want 1", id, written.count(id))
		}
	}
	runs := 0
	for i := range sent {
		runs += max(0, fake.count(fmt.Sprintf("s-%d", i))-1) + max(0, fake.count(fmt.Sprintf("e-%d", i))-1)
	}
	t.Logf("records run more than once (their acks died with the leader): %d", runs)
}

// counts counts the results a durable door writes, by uri.
type counts struct {
	trickle
	n map[string]int
}

func (c *counts) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.n)
}

func (c *counts) count(uri string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[uri]
}

// collectCounts runs ConsumeResultBatches for the door "door" of job, as a
// durable door does, counting what it writes.
func collectCounts(t *testing.T, nc *nats.Conn, job string) *counts {
	t.Helper()
	c := &counts{n: map[string]int{}}
	js := newJS(t, nc)
	meshtest.Run(t, func(ctx context.Context) error {
		return mesh.ConsumeResultBatches(ctx, js, job, "door", mesh.ResultsSubject(job, "door"), 64, func(_ context.Context, rs []mesh.Result) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, r := range rs {
				c.n[r.URI]++
				c.answers = append(c.answers, time.Now())
			}
			return nil
		})
	})
	return c
}
