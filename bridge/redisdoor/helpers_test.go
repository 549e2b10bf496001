package redisdoor_test

import (
	"context"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// enqueue adds a record the way the Python InputQueue does:
// XADD <stream> * uri <uri> data <data> [serde stream].
func enqueue(tb testing.TB, rdb *goredis.Client, stream, uri, data string, serde bool) string {
	tb.Helper()
	vals := []any{"uri", uri, "data", data}
	if serde {
		vals = append(vals, "serde", "stream")
	}
	id, err := rdb.XAdd(context.Background(), &goredis.XAddArgs{Stream: stream, Values: vals}).Result()
	if err != nil {
		tb.Fatalf("XADD: %v", err)
	}
	return id
}

// query reads a result the way OutputQueue.query does: HGETALL the key
// until it holds "value", then DEL it.
func query(tb testing.TB, rdb *goredis.Client, job, uri string) string {
	tb.Helper()
	key := "cluster-serving_" + job + ":" + uri
	var v string
	meshtest.WaitFor(tb, "result "+key, func() bool {
		m, err := rdb.HGetAll(context.Background(), key).Result()
		if err != nil {
			tb.Fatalf("HGETALL: %v", err)
		}
		var ok bool
		v, ok = m["value"]
		return ok
	})
	rdb.Del(context.Background(), key)
	return v
}
