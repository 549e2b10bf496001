package respdoor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"slices"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	"github.com/cluster-serving/cluster-serving/bridge/redisdoor"
	"github.com/cluster-serving/cluster-serving/bridge/respdoor"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// record is one XADD of the original client: its uri and fields.
type record struct {
	job, uri string
	fields   []any
}

// records are the records both doors get: JSON instances (serde stream),
// a real pyarrow ndarray payload (base64 Arrow), a record the model
// refuses (NaN), and a uri that needs encoding in a bucket key.
func records(tb testing.TB) []record {
	ndarray := strings.TrimSpace(string(infertest.Fixture(tb, "payloads/ndarray-128-base64")))
	x := func(v ...float32) string {
		b, _ := json.Marshal(map[string]any{"instances": []any{map[string]any{"x": v}}})
		return string(b)
	}
	return []record{
		{"add", "json-1", []any{"data", x(1, 2, 3, 4), "serde", "stream"}},
		{"add", "dir/ä b.jpg", []any{"data", x(-1, 0, 0.5, 9), "serde", "stream"}},
		{"add", "bad", []any{"data", x(1, 2), "serde", "stream"}},
		{"add128", "ndarray", []any{"data", ndarray}},
	}
}

// served are the models of records: add (add_f32) and add128
// (add_f32_128, the ndarray fixture's model).
var served = []doortest.Served{add, {Name: "add128", File: "add_f32_128"}}

// xadd writes r through rdb as the original client does and returns the
// entry id.
func xadd(tb testing.TB, rdb *goredis.Client, r record) string {
	tb.Helper()
	id, err := rdb.XAdd(context.Background(), &goredis.XAddArgs{Stream: r.job, Values: append([]any{"uri", r.uri}, r.fields...)}).Result()
	if err != nil {
		tb.Fatalf("XADD %s: %v", r.uri, err)
	}
	return id
}

// query reads r's result as OutputQueue.query does: HGETALL until it
// holds value, then DEL.
func query(tb testing.TB, rdb *goredis.Client, job, uri string) string {
	tb.Helper()
	key := redisdoor.ResultKey(job, uri)
	var v string
	meshtest.WaitFor(tb, "result "+key, func() bool {
		m, err := rdb.HGetAll(context.Background(), key).Result()
		if err != nil {
			tb.Fatalf("HGETALL %s: %v", key, err)
		}
		var ok bool
		v, ok = m[redisdoor.ResultField]
		return ok
	})
	if n, err := rdb.Del(context.Background(), key).Result(); err != nil || n != 1 {
		tb.Fatalf("DEL %s: got %d, %v, want 1", key, n, err)
	}
	return v
}

// TestSameValuesAsRedisDoor runs the same records through a Redis door
// (on a real redis-server) and the RESP door, both on one mesh, and
// checks that every value is byte-identical, read with go-redis.
func TestSameValuesAsRedisDoor(t *testing.T) {
	s := startDoor(t, respdoor.Config{}, nil, served...)
	rdb := goredis.NewClient(&goredis.Options{Addr: s.redisDoors(t)})
	defer rdb.Close()
	var last string
	for _, r := range records(t) {
		id := xadd(t, s.rdb, r)
		if last != "" && !idAfter(id, last) {
			t.Errorf("entry id %s after %s: want ids rising", id, last)
		}
		last = id
		xadd(t, rdb, r)
	}
	for _, r := range records(t) {
		want := query(t, rdb, r.job, r.uri)
		got := query(t, s.rdb, r.job, r.uri)
		if got != want {
			t.Errorf("%s: RESP door %.60q, Redis door %.60q: want byte-identical values", r.uri, got, want)
		}
		if (r.uri == "bad") != (got == redisdoor.NaN) {
			t.Errorf("%s: got %.60q", r.uri, got)
		}
	}
	if keys, err := s.rdb.Keys(context.Background(), "*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("KEYS * after every DEL: got %q, %v, want none", keys, err)
	}
}

// idAfter reports whether Redis entry id a (<ms>-<seq>) comes after b.
func idAfter(a, b string) bool {
	var am, as, bm, bs int64
	fmt.Sscanf(a, "%d-%d", &am, &as)
	fmt.Sscanf(b, "%d-%d", &bm, &bs)
	return am > bm || am == bm && as > bs
}

// TestKeysAndScan lists results with KEYS and SCAN (MATCH, COUNT, the
// cursor), as dequeue() and redis-cli --scan do, and reads them all.
func TestKeysAndScan(t *testing.T) {
	s := startDoor(t, respdoor.Config{}, nil, add)
	ctx := context.Background()
	var want []string
	for i := range 25 {
		r := record{"add", fmt.Sprintf("k%02d.x", i), []any{"data", `{"instances":[{"x":[1,2,3,4]}]}`, "serde", "stream"}}
		xadd(t, s.rdb, r)
		want = append(want, redisdoor.ResultKey("add", r.uri))
	}
	meshtest.WaitFor(t, "25 results", func() bool {
		n, _ := s.rdb.Keys(ctx, "cluster-serving_add:*").Result()
		return len(n) == 25
	})
	got, err := s.rdb.Keys(ctx, "cluster-serving_add:k1?.x").Result()
	if err != nil || len(got) != 10 || got[0] != "cluster-serving_add:k10.x" {
		t.Errorf("KEYS k1?.x: got %q, %v, want k10.x to k19.x", got, err)
	}
	var scanned []string
	iter := s.rdb.Scan(ctx, 0, "cluster-serving_add:*", 4).Iterator()
	for iter.Next(ctx) {
		scanned = append(scanned, iter.Val())
		if len(scanned) == 3 { // deleting keys meanwhile skips no other key
			if err := s.rdb.Del(ctx, want[24]).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(scanned)
	scanned = slices.DeleteFunc(scanned, func(k string) bool { return k == want[24] })
	if !slices.Equal(scanned, want[:24]) {
		t.Errorf("SCAN: got %q, want %q", scanned, want[:24])
	}
	n, err := s.rdb.Exists(ctx, want[0], want[0], want[24]).Result()
	if err != nil || n != 2 {
		t.Errorf("EXISTS k00 k00 k24 (deleted): got %d, %v, want 2", n, err)
	}
	if v, err := s.rdb.HGet(ctx, want[0], "value").Result(); err != nil || !strings.HasPrefix(v, "/////") {
		t.Errorf("HGET: got %.20q, %v, want a base64 Arrow stream", v, err)
	}
}
