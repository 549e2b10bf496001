package respdoor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/bridge/respdoor"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// TestStopWhileWriting stops a door while clients XADD to it: every XADD
// that got an entry id gets its result, read through a second door
// process of the same job (the bucket and the results are shared, and
// the two processes' message ids never collide).
func TestStopWhileWriting(t *testing.T) {
	m := startDoorMesh(t, add)
	first := startOn(t, m, respdoor.Config{Jobs: []string{"add"}}, nil)
	second := startOn(t, m, respdoor.Config{Jobs: []string{"add"}}, nil)
	ctx := context.Background()
	var mu sync.Mutex
	var stored []string
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rdb := goredis.NewClient(&goredis.Options{Addr: first.addr, MaxRetries: -1})
			defer rdb.Close()
			for i := 0; ; i++ {
				uri := fmt.Sprintf("c%d-%d", c, i)
				err := rdb.XAdd(ctx, &goredis.XAddArgs{Stream: "add", Values: []any{"uri", uri, "data", `{"instances":[{"x":[1,2,3,4]}]}`, "serde", "stream"}}).Err()
				if err != nil {
					return // the door stopped: no id, no promise
				}
				mu.Lock()
				stored = append(stored, uri)
				mu.Unlock()
			}
		}()
	}
	meshtest.WaitFor(t, "40 XADDs", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(stored) >= 40
	})
	first.stop()
	wg.Wait()
	for _, uri := range stored {
		if v := query(t, second.rdb, "add", uri); v == "NaN" {
			t.Errorf("%s: got NaN", uri)
		}
	}
	t.Logf("%d XADDs answered with an id before the stop, all served", len(stored))
}
