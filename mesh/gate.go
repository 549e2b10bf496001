package mesh

import "sync"

// gate bounds the records in flight (MaxInflight) and lets shutdown wait
// for those it admitted. A record that finds no slot waits in its rank's
// line; a slot that frees goes to the first waiter of the lowest rank,
// so that a job's high-priority records overtake the low-priority ones
// this worker holds (schedule.go). Without levels every record has rank
// 0: first come, first served. Safe for concurrent use.
type gate struct {
	stopping chan struct{} // closed when shutdown begins
	wg       sync.WaitGroup

	mu      sync.Mutex
	free    int
	waiting [MaxLevels + 1][]chan struct{} // per rank, oldest first
	waiters int
	shut    bool
}

func newGate(n int) *gate {
	return &gate{free: n, stopping: make(chan struct{})}
}

// enter takes a slot for a record of rank (0 the highest, at most
// MaxLevels), waiting for one but not past the start of shutdown: the
// consume callback must keep draining its buffer so Closed fires. It
// reports false when the record must go back to the queue.
func (g *gate) enter(rank int) bool {
	rank = min(max(rank, 0), MaxLevels)
	g.mu.Lock()
	if g.shut {
		g.mu.Unlock()
		return false
	}
	if g.free > 0 && g.waiters == 0 {
		g.free--
		g.wg.Add(1)
		g.mu.Unlock()
		return true
	}
	turn := make(chan struct{})
	g.waiting[rank] = append(g.waiting[rank], turn)
	g.waiters++
	g.mu.Unlock()
	select {
	case <-turn:
		return true // leave handed its slot over, counted in wg
	case <-g.stopping:
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	line := g.waiting[rank]
	for i, t := range line {
		if t == turn {
			g.waiting[rank] = append(line[:i], line[i+1:]...)
			g.waiters--
			return false
		}
	}
	return true // handed a slot while shutdown began: run it
}

// admits reports whether a record would take a slot now without
// waiting. A hint: a record of another partition may take the slot
// first. A batch's items, which wait for each other in the model's
// batcher, leave out those that would wait here (batch.go).
func (g *gate) admits() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.shut && g.free > 0 && g.waiters == 0
}

// leave gives back the slot of an admitted record once it is settled: to
// the first waiter of the lowest rank, else to the free slots.
func (g *gate) leave() {
	g.mu.Lock()
	if g.waiters > 0 {
		for r := range g.waiting {
			if len(g.waiting[r]) == 0 {
				continue
			}
			turn := g.waiting[r][0]
			g.waiting[r] = g.waiting[r][1:]
			g.waiters--
			g.wg.Add(1) // the next record's, before this one's Done
			close(turn)
			break
		}
	} else {
		g.free++
	}
	g.mu.Unlock()
	g.wg.Done()
}

// close admits no more records and returns a channel closed once every
// admitted record has left.
func (g *gate) close() <-chan struct{} {
	g.mu.Lock()
	g.shut = true
	g.mu.Unlock()
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	return done
}
