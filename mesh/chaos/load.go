package chaos

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	goredis "github.com/redis/go-redis/v9"
)

// LoadConfig shapes the load. Zero values mean the defaults named.
type LoadConfig struct {
	Rate     int           // good requests per second on each door; default 50
	Deadline time.Duration // a request unanswered after it is lost; default 15s
	// AttemptTimeout is how long a NATS client waits before it sends the
	// same request again (a door that died holding it never answers);
	// default 5s.
	AttemptTimeout time.Duration
	MaxOutstanding int // per door; past it a tick is skipped and counted; default 5000
}

// Load drives the three doors of a Cluster and records every request.
// Start it with Run; Garbage adds bad clients beside the good ones.
type Load struct {
	c   *Cluster
	cfg LoadConfig

	nc    *nats.Conn // the clients' own connection
	inbox string     // reply subjects are inbox.<id>
	rdb   *goredis.Client
	resp  *goredis.Client // the RESP door's clients
	hc    *http.Client

	nextID  atomic.Int64
	skipped [numDoors]atomic.Int64
	out     [numDoors]atomic.Int64
	wg      sync.WaitGroup

	// natsHeard is when the NATS door last answered (unix ns): see
	// moveOffSilentServer.
	natsHeard atomic.Int64

	mu      sync.Mutex
	reqs    []*Request
	byID    map[int64]*Request
	pending map[int64]chan answer // answers routed to the waiting sender
	strays  int                   // Redis or RESP results under no uri of ours
}

// answer is what came back for one attempt: a status (200 when right,
// -1 when wrong, 503 for retry, anything else the door's code), and
// noResponders when NATS found nobody to ask.
type answer struct {
	status       int
	err          string
	noResponders bool
}

// NewLoad connects the clients: NATS with unlimited reconnects, Redis
// without the client library's own retries (a retried XADD whose first
// try was taken would be a second request), HTTP with a pool.
func NewLoad(ctx context.Context, c *Cluster, cfg LoadConfig) (*Load, error) {
	if cfg.Rate == 0 {
		cfg.Rate = 50
	}
	if cfg.Deadline == 0 {
		cfg.Deadline = 15 * time.Second
	}
	if cfg.AttemptTimeout == 0 {
		cfg.AttemptTimeout = 5 * time.Second
	}
	if cfg.MaxOutstanding == 0 {
		cfg.MaxOutstanding = 5000
	}
	l := &Load{c: c, cfg: cfg, pending: map[int64]chan answer{}, byID: map[int64]*Request{}, inbox: "_INBOX.chaos." + nuid.Next()}
	var err error
	l.nc, err = nats.Connect(c.URLs, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.ReconnectBufSize(64<<20), nats.Name("chaos load"))
	if err != nil {
		return nil, err
	}
	if _, err := l.nc.Subscribe(l.inbox+".*", l.onNATSReply); err != nil {
		l.nc.Close()
		return nil, err
	}
	l.rdb = goredis.NewClient(&goredis.Options{Addr: c.RedisURL, MaxRetries: -1, PoolSize: 64})
	l.resp = goredis.NewClient(&goredis.Options{Addr: c.RESPAddr, MaxRetries: -1, PoolSize: 64})
	l.hc = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	l.wg.Add(3)
	go func() { defer l.wg.Done(); l.pollRedis(ctx, DoorRedis) }()
	go func() { defer l.wg.Done(); l.pollRedis(ctx, DoorRESP) }()
	go func() { defer l.wg.Done(); l.moveOffSilentServer(ctx) }()
	return l, nil
}

// Silence of the NATS door for natsSilence, with requests waiting, moves
// the clients' connection to another server, at most once per natsSettle.
const (
	natsSilence = 3 * time.Second
	natsSettle  = 10 * time.Second
)

// moveOffSilentServer does what a NATS client of a cluster must do when
// the server it is connected to is cut off from the others (a
// partition): its connection stays healthy, but no door is reachable
// through it. Past natsSilence without an answer while requests wait, it
// reconnects, and nats.go picks another server of the list.
func (l *Load) moveOffSilentServer(ctx context.Context) {
	l.natsHeard.Store(time.Now().UnixNano())
	moved := time.Time{}
	every(ctx, 500*time.Millisecond, func() {
		silent := time.Since(time.Unix(0, l.natsHeard.Load()))
		if silent < natsSilence || time.Since(moved) < natsSettle || l.out[DoorNATS].Load() == 0 {
			return
		}
		moved = time.Now()
		_ = l.nc.ForceReconnect()
	})
}

// Close waits for every sender and the Redis poller (ctx of NewLoad must
// have ended), then closes the clients.
func (l *Load) Close() {
	l.wg.Wait()
	l.nc.Close()
	_ = l.rdb.Close()
	_ = l.resp.Close()
	l.hc.CloseIdleConnections()
}

// Run sends good requests at Rate on each door until ctx ends. Load is
// open-loop: a stalled door does not slow the sending, so a stall shows as
// a gap and as late answers rather than as fewer requests.
func (l *Load) Run(ctx context.Context) {
	for d := range numDoors {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			every(ctx, time.Second/time.Duration(l.cfg.Rate), func() { l.spawn(d, false) })
		}()
	}
}

// every calls fn each period until ctx ends.
func every(ctx context.Context, period time.Duration, fn func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// Burst sends n good requests on each door at once (a worker then holds a
// full batch when it is killed).
func (l *Load) Burst(n int) {
	for range n {
		for d := range numDoors {
			l.spawn(d, false)
		}
	}
}

// Garbage runs clients sending bad requests on every door as fast as the
// door answers them (clients per door, each waiting for its answer), until
// ctx ends.
func (l *Load) Garbage(ctx context.Context, clients int) {
	for d := range numDoors {
		for range clients {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				for ctx.Err() == nil {
					l.do(l.newRequest(d, true))
				}
			}()
		}
	}
}

// spawn sends one request in a goroutine of its own, unless MaxOutstanding
// requests of the door are still open.
func (l *Load) spawn(d Door, garbage bool) {
	if l.out[d].Load() >= int64(l.cfg.MaxOutstanding) {
		l.skipped[d].Add(1)
		return
	}
	l.out[d].Add(1)
	r := l.newRequest(d, garbage)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer l.out[d].Add(-1)
		l.do(r)
	}()
}

func (l *Load) newRequest(d Door, garbage bool) *Request {
	r := &Request{Door: d, ID: l.nextID.Add(1), Garbage: garbage, Sent: time.Now()}
	l.mu.Lock()
	l.reqs = append(l.reqs, r)
	l.byID[r.ID] = r
	l.pending[r.ID] = make(chan answer, 8)
	l.mu.Unlock()
	return r
}

// do sends r through its door until it is answered or its deadline passes.
func (l *Load) do(r *Request) {
	deadline := r.Sent.Add(l.cfg.Deadline)
	switch r.Door {
	case DoorNATS:
		l.doNATS(r, deadline)
	case DoorHTTP:
		l.doHTTP(r, deadline)
	case DoorRedis, DoorRESP:
		l.doRedis(r, deadline)
	}
	l.mu.Lock()
	delete(l.pending, r.ID)
	l.mu.Unlock()
}

// settle records a final outcome once; a late answer of an attempt that
// was given up on is still counted in Answers by the door's reader.
func (l *Load) settle(r *Request, a answer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.Status != 0 {
		return
	}
	r.Status, r.Err = a.status, a.err
	if a.status == 200 {
		r.Answered = time.Now()
	}
}

// resent counts a send after an attempt that got no answer at all: the
// first may still be served, so one more answer is not a duplicate.
func (l *Load) resent(r *Request) {
	l.mu.Lock()
	r.Resent++
	l.mu.Unlock()
}

// right counts a right answer of request id (seen by a door's reader even
// after its sender stopped waiting) and returns the request.
func (l *Load) right(id int64) *Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.byID[id]
	if r != nil {
		r.Answers++
	}
	return r
}

func (l *Load) busy(r *Request) {
	l.mu.Lock()
	r.Busy++
	l.mu.Unlock()
}

// route hands an answer to the sender waiting for id, if any still waits.
func (l *Load) route(id int64, a answer) {
	l.mu.Lock()
	ch := l.pending[id]
	l.mu.Unlock()
	if ch != nil {
		select {
		case ch <- a:
		default:
		}
	}
}

func (l *Load) wait(id int64) chan answer {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pending[id]
}

// Requests returns a snapshot of every request so far.
func (l *Load) Requests() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Request, len(l.reqs))
	for i, r := range l.reqs {
		out[i] = *r
	}
	return out
}

// Skipped is how many ticks found MaxOutstanding requests open, per door.
func (l *Load) Skipped() [numDoors]int64 {
	var s [numDoors]int64
	for d := range numDoors {
		s[d] = l.skipped[d].Load()
	}
	return s
}
