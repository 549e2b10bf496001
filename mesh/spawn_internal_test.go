package mesh

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// TestSpawnerRunsEveryFunctionAndLetsIdleGoroutinesGo: every function
// handed to run is called once, goroutines are reused for later
// functions, and the kept ones end once idle for the idle time.
func TestSpawnerRunsEveryFunctionAndLetsIdleGoroutinesGo(t *testing.T) {
	base := runtime.NumGoroutine()
	s := newSpawner(50 * time.Millisecond)
	var ran atomic.Int64
	var wg sync.WaitGroup
	release := make(chan struct{})
	const busy = 20
	for range busy { // all at once: each needs a goroutine of its own
		wg.Add(1)
		s.run(func() { defer wg.Done(); <-release; ran.Add(1) })
	}
	if n := runtime.NumGoroutine() - base; n < busy {
		t.Fatalf("%d goroutines for %d blocked functions, want at least %d", n, busy, busy)
	}
	close(release)
	wg.Wait()
	for range 200 { // one at a time: the kept goroutines take them
		wg.Add(1)
		s.run(func() { defer wg.Done(); ran.Add(1) })
		wg.Wait()
	}
	if n := runtime.NumGoroutine() - base; n > busy {
		t.Errorf("%d goroutines after 200 functions run one at a time, want the %d kept ones at most", n, busy)
	}
	if got := ran.Load(); got != busy+200 {
		t.Errorf("ran %d functions, want %d", got, busy+200)
	}
	infertest.WaitFor(t, "the idle goroutines to end", func() bool { return runtime.NumGoroutine() <= base })
}
