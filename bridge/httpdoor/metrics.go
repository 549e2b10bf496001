package httpdoor

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// reservoirSize bounds the samples a timer keeps (Vitter's algorithm R, as
// the Dropwizard UniformReservoir the original frontend used).
const reservoirSize = 1028

// timer counts events and keeps a uniform sample of their durations in
// milliseconds. Safe for concurrent use.
type timer struct {
	name  string
	start time.Time

	mu      sync.Mutex
	count   int64
	samples []float64
}

func (t *timer) observe(d time.Duration) {
	ms := float64(d) / float64(time.Millisecond)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.count++
	if len(t.samples) < reservoirSize {
		t.samples = append(t.samples, ms)
		return
	}
	if i := rand.Int64N(t.count); i < reservoirSize {
		t.samples[i] = ms
	}
}

// timerStats is one element of GET /metrics; durations in milliseconds,
// meanRate in events per second since the timer was created.
type timerStats struct {
	Name     string  `json:"name"`
	Count    int64   `json:"count"`
	MeanRate float64 `json:"meanRate"`
	Min      float64 `json:"min"`
	Max      float64 `json:"max"`
	Mean     float64 `json:"mean"`
	Median   float64 `json:"median"`
	StdDev   float64 `json:"stdDev"`
	P75      float64 `json:"_75thPercentile"`
	P95      float64 `json:"_95thPercentile"`
	P98      float64 `json:"_98thPercentile"`
	P99      float64 `json:"_99thPercentile"`
	P999     float64 `json:"_999thPercentile"`
}

func (t *timer) stats() timerStats {
	t.mu.Lock()
	s := slices.Clone(t.samples)
	n := t.count
	t.mu.Unlock()
	st := timerStats{Name: t.name, Count: n}
	if el := time.Since(t.start).Seconds(); el > 0 {
		st.MeanRate = float64(n) / el
	}
	if len(s) == 0 {
		return st
	}
	slices.Sort(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	st.Min, st.Max, st.Mean = s[0], s[len(s)-1], sum/float64(len(s))
	if len(s) > 1 {
		var sq float64
		for _, v := range s {
			sq += (v - st.Mean) * (v - st.Mean)
		}
		st.StdDev = math.Sqrt(sq / float64(len(s)-1))
	}
	q := func(p float64) float64 { // Dropwizard's UniformSnapshot.getValue
		pos := p * float64(len(s)+1)
		switch {
		case pos < 1:
			return s[0]
		case pos >= float64(len(s)):
			return s[len(s)-1]
		}
		lo := s[int(pos)-1]
		return lo + (pos-math.Floor(pos))*(s[int(pos)]-lo)
	}
	st.Median, st.P75, st.P95, st.P98, st.P99, st.P999 = q(0.5), q(0.75), q(0.95), q(0.98), q(0.99), q(0.999)
	return st
}

// registry holds the timers by name. Safe for concurrent use.
type registry struct {
	mu     sync.Mutex
	timers map[string]*timer
}

func newRegistry() *registry { return &registry{timers: map[string]*timer{}} }

func (r *registry) timer(name string) *timer {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.timers[name]
	if !ok {
		t = &timer{name: name, start: time.Now()}
		r.timers[name] = t
	}
	return t
}

// snapshot lists every timer's stats, sorted by name.
func (r *registry) snapshot() []timerStats {
	r.mu.Lock()
	ts := make([]*timer, 0, len(r.timers))
	for _, t := range r.timers {
		ts = append(ts, t)
	}
	r.mu.Unlock()
	out := make([]timerStats, len(ts))
	for i, t := range ts {
		out[i] = t.stats()
	}
	slices.SortFunc(out, func(a, b timerStats) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}
