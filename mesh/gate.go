package mesh

import "sync"

// gate bounds the records in flight (MaxInflight) and lets shutdown wait
// for those it admitted. Safe for concurrent use.
type gate struct {
	sem      chan struct{}
	stopping chan struct{} // closed when shutdown begins
	wg       sync.WaitGroup
	mu       sync.Mutex // orders wg.Add before wg.Wait
	shut     bool
}

func newGate(n int) *gate {
	return &gate{sem: make(chan struct{}, n), stopping: make(chan struct{})}
}

// enter takes a slot, waiting for one but not past the start of shutdown:
// the consume callback must keep draining its buffer so Closed fires. It
// reports false when the record must go back to the queue.
func (g *gate) enter() bool {
	select {
	case g.sem <- struct{}{}:
	case <-g.stopping:
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut {
		<-g.sem
		return false
	}
	g.wg.Add(1)
	return true
}

// leave gives back the slot of an admitted record once it is settled.
func (g *gate) leave() {
	<-g.sem
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
