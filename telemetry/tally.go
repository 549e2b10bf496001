package telemetry

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Tally is this process's own account of the requests its doors
// finished, for the status page and `cluster-serving status`: per door
// and job the count by outcome, the rate of the last RateWindow and
// latency percentiles; the doors the process opened; its last errors.
// Prometheus keeps the same counts as metrics, but a status reader needs
// them without a scrape: the mesh publishes Snapshot per process over
// NATS. Safe for concurrent use; a request costs a map lookup and one
// short lock of its door and job's cell.
type Tally struct {
	cells sync.Map // tallyKey -> *tallyCell

	mu    sync.Mutex
	doors map[string]string // opened door -> what it listens on
	errs  [keptErrors]ErrorRecord
	nerr  int
}

// RateWindow is the span of the rates a Tally reports: requests finished
// in the last full seconds, so a read does not undercount the current one.
const RateWindow = 10 * time.Second

// keptErrors is how many of its last errors a Tally keeps; maxMessage
// caps the length of each one's message.
const (
	keptErrors = 32
	maxMessage = 300
)

type tallyKey struct{ door, job string }

// tallyCell counts one door and job: by outcome, per second of the
// window (one slot more than the window: the current second fills while
// the window's full seconds are read), and the last latencies.
type tallyCell struct {
	mu       sync.Mutex
	outcomes map[string]uint64
	secs     [int(RateWindow/time.Second) + 1]struct {
		at int64
		n  uint64
	}
	lat LatencyRing
}

// ErrorRecord is one failed request as a door answered it.
type ErrorRecord struct {
	At      time.Time `json:"at"`
	Door    string    `json:"door"`
	Job     string    `json:"job"`
	Status  int       `json:"status"`
	Message string    `json:"message"`
	TraceID string    `json:"traceId,omitempty"`
}

// NewTally returns an empty Tally.
func NewTally() *Tally { return &Tally{doors: map[string]string{}} }

// Open records that the process serves door, listening on listen (an
// address, a subject or a URL), until the returned func is called. A
// URL's user info is removed (StripUserinfo): the process publishes its
// Tally to the mesh. A door open twice (two jobs' NATS doors) is one door.
func (t *Tally) Open(door, listen string) (closeDoor func()) {
	if t == nil {
		return func() {}
	}
	listen = StripUserinfo(listen)
	t.setDoor(door, &listen)
	return func() { t.setDoor(door, nil) }
}

// setDoor records door as listening on *listen, or as closed (nil).
func (t *Tally) setDoor(door string, listen *string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if listen == nil {
		delete(t.doors, door)
		return
	}
	t.doors[door] = *listen
}

// Request counts one request of job finished at door with outcome
// (OutcomeOf) after d (0 when unknown: kept out of the percentiles).
func (t *Tally) Request(door, job, outcome string, d time.Duration) {
	if t == nil {
		return
	}
	key := tallyKey{door, job}
	v, ok := t.cells.Load(key)
	if !ok {
		v, _ = t.cells.LoadOrStore(key, &tallyCell{outcomes: map[string]uint64{}})
	}
	c := v.(*tallyCell)
	now := time.Now().Unix()
	c.mu.Lock()
	c.outcomes[outcome]++
	s := &c.secs[now%int64(len(c.secs))]
	if s.at != now {
		s.at, s.n = now, 0
	}
	s.n++
	c.mu.Unlock()
	if d > 0 && outcome == OutcomeOK {
		c.lat.Add(d)
	}
}

// Error keeps one failed request (status >= 400) with the message the
// door answered, and the trace id of ctx's span when there is one.
func (t *Tally) Error(ctx context.Context, door, job string, status int, msg string) {
	if t == nil {
		return
	}
	if len(msg) > maxMessage { // cut on a character, not inside one
		msg = strings.ToValidUTF8(msg[:maxMessage], "") + "…"
	}
	e := ErrorRecord{At: time.Now().UTC(), Door: door, Job: job, Status: status, Message: msg}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		e.TraceID = sc.TraceID().String()
	}
	t.mu.Lock()
	t.errs[t.nerr%keptErrors] = e
	t.nerr++
	t.mu.Unlock()
}

// DoorTally is one door's account in a Snapshot: per job, and what it
// listens on ("" for a door the process answers without opening it: a
// worker answering NATS callers).
type DoorTally struct {
	Door   string     `json:"door"`
	Listen string     `json:"listen"`
	Jobs   []JobTally `json:"jobs,omitempty"`
}

// JobTally is one job's requests at one door: counts by outcome since
// the process started, requests per second over the last RateWindow, and
// the latency percentiles of its last answered requests (0 before one).
type JobTally struct {
	Job          string            `json:"job"`
	Outcomes     map[string]uint64 `json:"outcomes"`
	Rate         float64           `json:"rate"`
	LatencyP50Ms float64           `json:"latencyP50Ms"`
	LatencyP99Ms float64           `json:"latencyP99Ms"`
}

// Snapshot is the Tally now: every open door and every door with counts,
// sorted by name, jobs sorted; the kept errors, newest first.
func (t *Tally) Snapshot() (doors []DoorTally, errs []ErrorRecord) {
	if t == nil {
		return nil, nil
	}
	byDoor := map[string]*DoorTally{}
	t.mu.Lock()
	for d, l := range t.doors {
		byDoor[d] = &DoorTally{Door: d, Listen: l}
	}
	for i := range min(t.nerr, keptErrors) {
		errs = append(errs, t.errs[(t.nerr-1-i)%keptErrors])
	}
	t.mu.Unlock()
	now := time.Now().Unix()
	t.cells.Range(func(k, v any) bool {
		key := k.(tallyKey)
		dt := byDoor[key.door]
		if dt == nil {
			dt = &DoorTally{Door: key.door}
			byDoor[key.door] = dt
		}
		dt.Jobs = append(dt.Jobs, v.(*tallyCell).snapshot(key.job, now))
		return true
	})
	for _, dt := range byDoor {
		slices.SortFunc(dt.Jobs, func(a, b JobTally) int { return cmp.Compare(a.Job, b.Job) })
		doors = append(doors, *dt)
	}
	slices.SortFunc(doors, func(a, b DoorTally) int { return cmp.Compare(a.Door, b.Door) })
	return doors, errs
}

// snapshot is the cell as job's JobTally at second now.
func (c *tallyCell) snapshot(job string, now int64) JobTally {
	jt := JobTally{Job: job, Outcomes: map[string]uint64{}}
	var n uint64
	c.mu.Lock()
	for o, k := range c.outcomes {
		jt.Outcomes[o] = k
	}
	for _, s := range c.secs {
		if s.at < now && s.at >= now-int64(RateWindow/time.Second) {
			n += s.n
		}
	}
	c.mu.Unlock()
	jt.Rate = float64(n) / RateWindow.Seconds()
	p := c.lat.Percentiles(0.50, 0.99)
	jt.LatencyP50Ms, jt.LatencyP99Ms = Millis(p[0]), Millis(p[1])
	return jt
}

// Millis is d in milliseconds, to the microsecond: how the status
// document writes a latency.
func Millis(d time.Duration) float64 {
	return float64(d.Round(time.Microsecond)) / float64(time.Millisecond)
}

// LatencyRing keeps the last 1,024 latencies for percentiles. Safe for
// concurrent use; the zero value is ready.
type LatencyRing struct {
	mu  sync.Mutex
	buf [1024]time.Duration
	n   int
}

// Add keeps d, dropping the oldest once full.
func (r *LatencyRing) Add(d time.Duration) {
	r.mu.Lock()
	r.buf[r.n%len(r.buf)] = d
	r.n++
	r.mu.Unlock()
}

// Percentiles returns the q-quantiles (0..1) of the kept latencies; zeros
// when none were kept.
func (r *LatencyRing) Percentiles(qs ...float64) []time.Duration {
	r.mu.Lock()
	n := min(r.n, len(r.buf))
	s := slices.Clone(r.buf[:n])
	r.mu.Unlock()
	out := make([]time.Duration, len(qs))
	if n == 0 {
		return out
	}
	slices.Sort(s)
	for i, q := range qs {
		out[i] = s[min(n-1, int(q*float64(n)))]
	}
	return out
}
