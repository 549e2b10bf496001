package mesh

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestPartitionNames(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{PartitionStreamName("j", 0), "SERVING_j"},
		{PartitionStreamName("j", 2), "SERVING_j~2"},
		{PartitionSubject("j", 0), "serving.j.work"},
		{PartitionSubject("j", 2), "serving.j.work.2"},
		{ResultsPartitionStreamName("j", 0), "SERVING_j_RESULTS"},
		{ResultsPartitionStreamName("j", 2), "SERVING_j~2_RESULTS"},
		{ResultsPartitionSubject("j", 0, "serving.j.results.redis"), "serving.j.results.redis"},
		{ResultsPartitionSubject("j", 2, "serving.j.results.redis"), "serving.j.results-2.redis"},
		{ResultsPartitionSubject("j", 1, "serving.j.results.>"), "serving.j.results-1.>"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

// TestPartitionNamesNeverCollide checks that the names partitions p > 0
// add cannot equal a name of any job, whatever the job names (they match
// ^[A-Za-z0-9_-]+$, so jobs may end in _RESULTS or look like numbers).
func TestPartitionNamesNeverCollide(t *testing.T) {
	jobs := []string{"x", "x_RESULTS", "x_1", "x-1", "x1", "1", "x_RESULTS_RESULTS", "SERVING_x"}
	owner := map[string]string{}
	claim := func(name, who string) {
		if prev, ok := owner[name]; ok && prev != who {
			t.Errorf("%q is both %s and %s", name, prev, who)
		}
		owner[name] = who
	}
	for _, job := range jobs {
		for p := 1; p < 5; p++ {
			who := fmt.Sprintf("job %s partition %d", job, p)
			claim("stream "+PartitionStreamName(job, p), who+" work")
			claim("stream "+ResultsPartitionStreamName(job, p), who+" results")
			claim("subject "+PartitionSubject(job, p), who+" work")
			claim("subject "+ResultsPartitionSubject(job, p, ResultsSubject(job, ">")), who+" results")
			if got, ok := partitionOf(job, PartitionStreamName(job, p)); !ok || got != p {
				t.Errorf("partitionOf(%q, %q): got %d %v, want %d", job, PartitionStreamName(job, p), got, ok, p)
			}
		}
	}
	// Partition 0 keeps the names jobs had before partitions: none of
	// them may equal a name of a partition > 0.
	for _, job := range jobs {
		for _, name := range []string{"stream " + StreamName(job), "stream " + ResultsStreamName(job),
			"subject " + WorkSubject(job), "subject " + ResultsSubject(job, ">")} {
			if prev, ok := owner[name]; ok {
				t.Errorf("%q of job %s partition 0 is also %s", name, job, prev)
			}
		}
	}
	for _, name := range []string{"SERVING_x~01", "SERVING_x~0", "SERVING_x~-1", "SERVING_x~", "SERVING_xy~1", "SERVING_x_RESULTS"} {
		if p, ok := partitionOf("x", name); ok {
			t.Errorf("partitionOf(x, %q): got partition %d, want none", name, p)
		}
	}
}

func TestFirstPartition(t *testing.T) {
	const n, ids = 3, 3000
	counts := make([]int, n)
	for i := range ids {
		id := fmt.Sprintf("serving_stream:%d-0", 1700000000000+i)
		p := firstPartition(id, n)
		if p < 0 || p >= n {
			t.Fatalf("firstPartition(%q): got %d, want 0..%d", id, p, n-1)
		}
		if again := firstPartition(id, n); again != p {
			t.Fatalf("firstPartition(%q): got %d then %d, want the same", id, p, again)
		}
		counts[p]++
	}
	for p, c := range counts {
		if c < ids/n*8/10 {
			t.Errorf("partition %d: got %d of %d ids, want about %d", p, c, ids, ids/n)
		}
	}
	if got := firstPartition("any", 1); got != 0 {
		t.Errorf("one partition: got %d, want 0", got)
	}
}

func TestRouterSkipsFailedPartitions(t *testing.T) {
	now := time.Unix(1000, 0)
	r := newRouter(DefaultAttemptTimeout)
	r.now = func() time.Time { return now }
	subjects := []string{"a", "b", "c"}
	order := func() string { return fmt.Sprint(r.order(subjects, 1)) }

	if got, want := order(), "[1 2 0]"; got != want {
		t.Errorf("healthy: got %s, want %s", got, want)
	}
	r.failed("b")
	if got, want := order(), "[2 0 1]"; got != want {
		t.Errorf("b failed: got %s, want %s", got, want)
	}
	now = now.Add(time.Second)
	r.failed("c")
	if got, want := order(), "[0 1 2]"; got != want {
		t.Errorf("b then c failed: got %s, want %s (the one failed longest ago first)", got, want)
	}
	now = now.Add(skipFor - time.Second)
	if got, want := order(), "[1 0 2]"; got != want {
		t.Errorf("b's skip over: got %s, want %s", got, want)
	}
	now = now.Add(time.Second)
	if got, want := order(), "[1 2 0]"; got != want {
		t.Errorf("both skips over: got %s, want %s", got, want)
	}
	seen := map[int]bool{}
	for range 6 {
		seen[r.next(3)] = true
	}
	if len(seen) != 3 {
		t.Errorf("round-robin: got starts %v, want all of 0..2", seen)
	}
}

func TestTransient(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{jetstream.ErrNoStreamResponse, true},
		{nats.ErrNoResponders, true},
		{context.DeadlineExceeded, true},
		{nats.ErrTimeout, true},
		{&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{fmt.Errorf("nats: %w", &jetstream.APIError{Code: 400, ErrorCode: 10058, Description: "stream name already in use"}), false},
		{nats.ErrConnectionClosed, false},
		// seen in CI after a leader kill: the first attempt is still being stored
		{fmt.Errorf("nats: %w", &jetstream.APIError{Code: 409, ErrorCode: 10158, Description: "duplicate message id is in process"}), true},
	}
	for _, tt := range tests {
		if got := transient(tt.err); got != tt.want {
			t.Errorf("transient(%v): got %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestMapPublishErrTooLarge(t *testing.T) {
	for _, code := range []jetstream.ErrorCode{jsErrCodeHeaderTooLarge, jsErrCodeMsgTooLarge} {
		err := mapPublishErr(fmt.Errorf("nats: %w", &jetstream.APIError{Code: 400, ErrorCode: code}))
		if !errors.Is(err, status.ErrTooLarge) {
			t.Errorf("code %d: got %v, want status.ErrTooLarge", code, err)
		}
	}
}

func TestRecentIDs(t *testing.T) {
	now := time.Unix(1000, 0)
	r := newRecentIDs(time.Minute, 3)
	r.add("a", now)
	if !r.has("a", now.Add(59*time.Second)) {
		t.Error("a within the window: got unseen, want seen")
	}
	if r.has("a", now.Add(time.Minute)) {
		t.Error("a past the window: got seen, want unseen")
	}
	r.add("b", now.Add(time.Second))
	r.add("a", now.Add(2*time.Second)) // re-added: its first entry must not evict it
	r.add("c", now.Add(3*time.Second))
	r.add("d", now.Add(4*time.Second)) // over max: the oldest entries go
	if !r.has("a", now.Add(5*time.Second)) {
		t.Error("re-added a: got unseen, want seen")
	}
	if r.has("b", now.Add(5*time.Second)) {
		t.Error("b past max: got seen, want forgotten")
	}
	r.add("e", now.Add(2*time.Minute)) // everything else is older than the window
	if got, want := r.len(), 1; got != want {
		t.Errorf("got %d ids kept, want %d", got, want)
	}
}

func TestOneLineBoundsTheErrorHeader(t *testing.T) {
	long := strings.Repeat("é", 4000) + "\r\nend"
	got := oneLine(long)
	if len(got) > maxErrorBytes || !strings.HasSuffix(got, "...") || !utf8.ValidString(got) || strings.ContainsAny(got, "\r\n") {
		t.Fatalf("oneLine of %d bytes = %d bytes %q...", len(long), len(got), got[:20])
	}
	if got := oneLine("a\r\nb"); got != "a  b" {
		t.Fatalf("oneLine(a CRLF b) = %q", got)
	}
}

// TestBatchRoundTrip encodes requests as a coalesced batch and decodes
// them: every header value and body comes back, in order.
func TestBatchRoundTrip(t *testing.T) {
	var msgs []*nats.Msg
	for i := range 3 {
		m := nats.NewMsg("x")
		m.Header.Set(HeaderURI, fmt.Sprintf("uri-%d", i))
		m.Header.Add("Multi", "a")
		m.Header.Add("Multi", "b")
		m.Data = []byte(strings.Repeat("d", i*200)) // 0, 200, 400 bytes: varint widths
		msgs = append(msgs, m)
	}
	got, err := decodeBatch(encodeBatch(msgs))
	if err != nil {
		t.Fatalf("decodeBatch: %v", err)
	}
	if len(got) != len(msgs) {
		t.Fatalf("got %d requests, want %d", len(got), len(msgs))
	}
	for i, e := range got {
		if e.h.Get(HeaderURI) != msgs[i].Header.Get(HeaderURI) || strings.Join(e.h.Values("Multi"), ",") != "a,b" || string(e.data) != string(msgs[i].Data) {
			t.Errorf("request %d: got %v %q, want %v %q", i, e.h, e.data, msgs[i].Header, msgs[i].Data)
		}
	}
	for _, bad := range [][]byte{nil, []byte("CSB1"), []byte("CSB1\x00"), []byte("CSB1\x01\x01\x05k"), append(encodeBatch(msgs), 0), []byte("XXXX\x01\x00\x00")} {
		if _, err := decodeBatch(bad); !errors.Is(err, ErrBadBatch) {
			t.Errorf("decodeBatch(%q): got %v, want ErrBadBatch", bad, err)
		}
	}
}

// FuzzDecodeBatch: any bytes decode to requests or ErrBadBatch, never a
// panic, and what decodes encodes back to a body that decodes the same.
func FuzzDecodeBatch(f *testing.F) {
	m := nats.NewMsg("x")
	m.Header.Set(HeaderURI, "u")
	m.Data = []byte("body")
	f.Add(encodeBatch([]*nats.Msg{m, m}))
	f.Add([]byte("CSB1\x01\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeBatch(b)
		if err != nil {
			if !errors.Is(err, ErrBadBatch) {
				t.Fatalf("got %v, want ErrBadBatch", err)
			}
			return
		}
		msgs := make([]*nats.Msg, len(got))
		for i, e := range got {
			msgs[i] = &nats.Msg{Header: e.h, Data: e.data}
		}
		again, err := decodeBatch(encodeBatch(msgs))
		if err != nil || len(again) != len(got) {
			t.Fatalf("re-encoded batch: %d requests, %v; want %d", len(again), err, len(got))
		}
	})
}
