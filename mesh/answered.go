package mesh

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// AnsweredSubject is the core NATS subject on which job's workers tell
// each other which NATS callers they answered: serving.<job>.answered.
func AnsweredSubject(job string) string { return SubjectPrefix + "." + job + ".answered" }

// A NATS caller's request (ReplyCaller) has nothing between the worker
// and the caller to drop a second answer, so a worker acks a record it
// answered only once the server confirmed the ack (confirmAck). That
// does not cover an ack the server confirmed and then lost: a NATS
// server's OS crashed before it synced the consumer's state (the fault
// suite's crash while a partition was elsewhere). The record is
// delivered again, to another worker or the same one, which ran it and
// answered the caller a second time.
//
// So a worker remembers the callers it answered lately (answered), and
// tells the job's other workers on AnsweredSubject, in batches, with core
// NATS (fire and forget, no JetStream); a worker that gets a record whose
// caller it or another one answered acks it unrun and counts it
// (WorkerStats.AnsweredAlready). A request is its caller's reply subject
// and the time its NATS door took it (Cs-Received): a redelivery, a copy
// stored again (the request of a batch stored alone) and a door's retried
// store are the same request; a caller that sends again is a new one.
//
// A worker looks again just before it answers: a copy delivered while
// the first run still went on (a consumer leader that changed hands out
// records its predecessor had out; an ensemble's run lasts as long as its
// steps wait on the same outage) is answered by whichever run ends first.
//
// What is left: two runs that end within one note's delay of each other
// (answeredDelay and one crossing of NATS);
// a note lost (core NATS delivers at most once: a note on its way through
// a server that died, one dropped for a slow subscriber, or one sent
// before the worker subscribed, i.e. started); a worker killed between
// its answer and its note, as between its answer and its ack; and a
// record delivered again past answeredWindow, or past maxAnswered
// answers later. Each of those answers the caller twice, as before.
const (
	// answeredWindow is how long a worker remembers an answer: a
	// redelivery after a lost ack comes once the consumer's new leader
	// is elected and AckWait (10 s) passed, seconds to minutes later.
	answeredWindow = 5 * time.Minute
	// maxAnswered bounds the answers remembered: 8-byte keys, about 80
	// bytes each with the map and the queue, 20 MiB in all.
	maxAnswered = 1 << 18
	// answeredDelay is how long answers gather before they are told.
	answeredDelay = 10 * time.Millisecond
	// answeredBatch bounds a note's body: 4,096 answers.
	answeredBatch = 4096 * answerKeyLen
	// headerAnsweredBy names the worker that sent a note: it skips its own.
	headerAnsweredBy = "Cs-Answered-By"
	answerKeyLen     = 8
)

// answered is what a worker knows of the NATS callers answered lately,
// by itself or by the job's other workers, and the notes of its own
// answers it has still to send. It is safe for concurrent use.
type answered struct {
	nc      *nats.Conn
	subject string
	self    string // this worker's id, in headerAnsweredBy
	kick    chan struct{}

	mu   sync.Mutex
	seen *recentIDs
	out  []byte // keys to tell, answerKeyLen bytes each
	sub  noteSub
}

func newAnswered(nc *nats.Conn, job string) *answered {
	return &answered{nc: nc, subject: AnsweredSubject(job), self: nuid.Next(), kick: make(chan struct{}, 1),
		seen: newRecentIDs(answeredWindow, maxAnswered)}
}

// answerKey is the request a work message with headers h and reply r
// carries (see above): a hash of its caller's reply subject and its
// Cs-Received, or Nats-Msg-Id without one; for a durable record (the
// Redis and RESP doors'), of its results subject and its Nats-Msg-Id. A
// durable record is answered once anyway (its results' ids), but one
// handed over again in another batch (a door killed before its XACK)
// would run again: a copy of one whose result is stored is acked unrun
// as a caller's is. "" for a door's inbox request (the door drops a
// second answer), or one that names no id.
func answerKey(r Reply, h nats.Header) string {
	var id string
	switch r.Mode {
	case ReplyCaller:
		id = cmp.Or(h.Get(HeaderReceived), h.Get(HeaderMsgID))
	case ReplyDurable:
		// A durable record's id is the same in every copy its door
		// hands over (the Redis door's comes from the entry's id).
		id = h.Get(HeaderMsgID)
	}
	if id == "" {
		return ""
	}
	// FNV-1a, 64 bits: the same in every process, and a false match
	// (a caller left unanswered) about once in 2^64/maxAnswered.
	f := fnv.New64a()
	for _, s := range [...]string{r.To, "\x00", id} {
		_, _ = io.WriteString(f, s)
	}
	return string(f.Sum(nil))
}

// listen subscribes to the job's notes.
func (a *answered) listen() error { return a.sub.listen(a.nc, a.subject, a.heard) }

// close unsubscribes; notes still to send go with run's end.
func (a *answered) close() { a.sub.close() }

// has reports whether the request key was answered lately.
func (a *answered) has(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seen.has(key, time.Now())
}

// add remembers that this worker answered key, to be told to the
// others within answeredDelay (at once when a note is full).
func (a *answered) add(key string) {
	if key == "" {
		return
	}
	a.mu.Lock()
	a.seen.add(key, time.Now())
	first := len(a.out) == 0
	a.out = append(a.out, key...)
	var full []byte
	if len(a.out) >= answeredBatch {
		full, a.out = a.out, nil
	}
	a.mu.Unlock()
	switch {
	case full != nil:
		a.publish(full)
	case first:
		select {
		case a.kick <- struct{}{}:
		default:
		}
	}
}

// run sends the notes of this worker's answers answeredDelay after the
// first of each batch, until ctx ends; then it sends what is left.
func (a *answered) run(ctx context.Context) {
	for {
		select {
		case <-a.kick:
		case <-ctx.Done():
			a.flush()
			return
		}
		select {
		case <-time.After(answeredDelay):
		case <-ctx.Done():
		}
		a.flush()
	}
}

func (a *answered) flush() {
	a.mu.Lock()
	out := a.out
	a.out = nil
	a.mu.Unlock()
	if len(out) > 0 {
		a.publish(out)
	}
}

// publish sends a note: fire and forget (see above for what a lost one
// costs).
func (a *answered) publish(keys []byte) {
	m := nats.NewMsg(a.subject)
	m.Header.Set(headerAnsweredBy, a.self)
	m.Data = keys
	_ = a.nc.PublishMsg(m)
}

// heard remembers the answers of another worker's note.
func (a *answered) heard(m *nats.Msg) {
	if m.Header.Get(headerAnsweredBy) == a.self || len(m.Data)%answerKeyLen != 0 {
		return
	}
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := 0; i < len(m.Data); i += answerKeyLen {
		a.seen.add(string(m.Data[i:i+answerKeyLen]), now)
	}
}

// answeredAlready acks msg unrun when its NATS caller was answered
// already, by this worker or by another one that told so, and counts it:
// a record delivered again after its ack was lost.
func (w *Worker) answeredAlready(msg jetstream.Msg) bool {
	h := msg.Headers()
	key := answerKey(replyOf(h), h)
	if key == "" || !w.answered.has(key) {
		return false
	}
	w.answeredBefore.Add(1)
	w.settle(msg, msg.Ack)
	return true
}

// noteSub is a worker's subscription to one of its job's note subjects
// (AnsweredSubject, CancelSubject), closed once: safe for concurrent use.
type noteSub struct {
	mu  sync.Mutex
	sub *nats.Subscription
}

func (n *noteSub) listen(nc *nats.Conn, subject string, heard nats.MsgHandler) error {
	sub, err := nc.Subscribe(subject, heard)
	if err != nil {
		return fmt.Errorf("mesh: subscribe %s: %w", subject, err)
	}
	n.mu.Lock()
	n.sub = sub
	n.mu.Unlock()
	return nil
}

func (n *noteSub) close() {
	n.mu.Lock()
	sub := n.sub
	n.sub = nil
	n.mu.Unlock()
	if sub != nil {
		_ = sub.Unsubscribe()
	}
}
