package mesh

import "time"

// spawner runs functions on goroutines that it keeps for a while after
// each function returns, for the next one. A request run on a fresh
// goroutine pays for its stack growing, by copies, from the starting
// size to the depth the work needs (a NATS publish, a decode, a span):
// several µs a request in the profiles of the NATS door and the worker,
// as much as some of what the request does. A kept goroutine has grown
// already (until a GC shrinks its stack while idle). Safe for concurrent
// use; the zero value is not: use newSpawner.
type spawner struct {
	tasks chan func()
	idle  time.Duration
}

// spawnerIdle is how long a kept goroutine waits for work before it ends.
const spawnerIdle = 10 * time.Second

func newSpawner(idle time.Duration) *spawner {
	return &spawner{tasks: make(chan func()), idle: idle}
}

// run calls f on a kept goroutine that is idle, or on a new one. It
// never waits: the callers bound how many run at once.
func (s *spawner) run(f func()) {
	select {
	case s.tasks <- f:
	default:
		go s.loop(f)
	}
}

func (s *spawner) loop(f func()) {
	t := time.NewTimer(s.idle)
	defer t.Stop()
	for {
		f()
		t.Reset(s.idle)
		select {
		case f = <-s.tasks:
		case <-t.C:
			return
		}
	}
}
