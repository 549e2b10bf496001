package infer

import (
	"container/heap"
	"context"
	"sync"
)

// decodeSlots bounds the images decoding at once. Unlike a FIFO semaphore
// it hands a freed slot to the cheapest waiting image (then the oldest),
// so that a photo does not wait behind a queue of huge images that each
// take seconds to decode: with 16 5792×5792 PNGs in flight on 2 cores, a
// small JPEG waited 20 s in FIFO order. A huge image can wait while
// cheaper ones keep coming, until its ctx ends. Safe for concurrent use.
type decodeSlots struct {
	mu      sync.Mutex
	free    int
	seq     uint64
	waiting slotWaiters
}

type slotWaiter struct {
	cost, seq int64
	ready     chan struct{} // closed when the slot is handed over
	index     int           // in waiting; -1 once handed over
}

func newDecodeSlots(n int) *decodeSlots { return &decodeSlots{free: n} }

// acquire takes a slot for an image of cost bytes, waiting while ctx
// lasts; it returns ctx's error if ctx ends first.
func (s *decodeSlots) acquire(ctx context.Context, cost int64) error {
	s.mu.Lock()
	if s.free > 0 && len(s.waiting) == 0 {
		s.free--
		s.mu.Unlock()
		return nil
	}
	s.seq++
	w := &slotWaiter{cost: cost, seq: int64(s.seq), ready: make(chan struct{})}
	heap.Push(&s.waiting, w)
	s.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	handed := w.index < 0
	if !handed {
		heap.Remove(&s.waiting, w.index)
	}
	s.mu.Unlock()
	if handed { // the slot came with ctx's end: pass it on
		s.release()
	}
	return ctx.Err()
}

// release gives a slot back, to the cheapest waiter if any.
func (s *decodeSlots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.waiting) == 0 {
		s.free++
		return
	}
	w := heap.Pop(&s.waiting).(*slotWaiter)
	close(w.ready)
}

// waiters returns how many images wait for a slot (tests).
func (s *decodeSlots) waiters() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting)
}

// slotWaiters is a heap of waiters, cheapest then oldest first.
type slotWaiters []*slotWaiter

func (h slotWaiters) Len() int { return len(h) }
func (h slotWaiters) Less(i, j int) bool {
	if h[i].cost != h[j].cost {
		return h[i].cost < h[j].cost
	}
	return h[i].seq < h[j].seq
}
func (h slotWaiters) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *slotWaiters) Push(x any) {
	w := x.(*slotWaiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *slotWaiters) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	w.index = -1
	*h = old[:len(old)-1]
	return w
}
