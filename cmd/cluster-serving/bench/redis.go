package bench

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/bridge/redisdoor"
	"github.com/cluster-serving/cluster-serving/infer/infertest/freeport"
)

// redisServer is a redis-server the bench starts on a free port.
type redisServer struct {
	cmd  *exec.Cmd
	addr string
	port int
}

func startBenchRedis() (*redisServer, error) {
	ports, err := freeport.Take(1)
	if err != nil {
		return nil, err
	}
	port := ports[0]
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := startProc(cmd); err != nil {
		return nil, fmt.Errorf("redis-server (apt-get install redis-server): %w", err)
	}
	r := &redisServer{cmd: cmd, addr: fmt.Sprintf("127.0.0.1:%d", port), port: port}
	rdb := goredis.NewClient(&goredis.Options{Addr: r.addr})
	defer rdb.Close()
	for range 100 {
		if rdb.Ping(context.Background()).Err() == nil {
			return r, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.stop()
	return nil, errors.New("redis-server did not answer")
}

func (r *redisServer) stop() {
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
}

// redisOp is one client of the original's Python API: XADD a record, then
// poll HGETALL on its result key until it holds a value, then DEL it. poll
// is the pause between polls (0: poll back to back). serde is the entry's
// serde field: "stream" for a JSON body, "" for none (base64 Arrow, the
// original's default).
func redisOp(addr, job string, data []byte, serde string, poll time.Duration, conc int) (op, func()) {
	return redisPollOp(addr, job, data, serde, poll, false, conc)
}

// redisBackoffOp is redisOp polling as the original's InputQueue.predict
// does: it sleeps step, then 2·step, 3·step... between polls (the
// original's step is 1 ms). For a request that takes a second that is
// about 45 polls, where a fixed 2 ms pause makes 500: on the 2 cores that
// the bench shares with the model, those polls (the client's and
// redis-server's CPU) would be measured as the door's cost.
func redisBackoffOp(addr, job string, data []byte, serde string, step time.Duration, conc int) (op, func()) {
	return redisPollOp(addr, job, data, serde, step, true, conc)
}

func redisPollOp(addr, job string, data []byte, serde string, poll time.Duration, backoff bool, conc int) (op, func()) {
	rdb := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: conc + 4})
	var seq atomic.Int64
	return func(ctx context.Context, g int) error {
		uri := "b" + strconv.FormatInt(seq.Add(1), 10)
		values := []any{"uri", uri, "data", data}
		if serde != "" {
			values = append(values, "serde", serde)
		}
		if err := rdb.XAdd(ctx, &goredis.XAddArgs{Stream: job, Values: values}).Err(); err != nil {
			return err
		}
		key := redisdoor.ResultKey(job, uri)
		pause := poll
		for {
			v, err := rdb.HGet(ctx, key, redisdoor.ResultField).Result()
			if err == nil {
				rdb.Del(ctx, key)
				if v == redisdoor.NaN {
					return errors.New("NaN result")
				}
				return nil
			}
			if !errors.Is(err, goredis.Nil) {
				return err
			}
			if pause > 0 {
				select {
				case <-time.After(pause):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if backoff {
				pause += poll
			}
		}
	}, func() { _ = rdb.Close() }
}

var rpsRE = regexp.MustCompile(`([0-9.]+) requests per second`)

// redisBenchmarkXADD is redis-benchmark's XADD rate with 50 clients.
func redisBenchmarkXADD(port int) (float64, error) {
	out, err := combinedOutput(exec.Command("redis-benchmark", "-p", strconv.Itoa(port), "-c", "50", "-n", "200000", "-q",
		"XADD", "benchstream", "*", "uri", "u", "data", "d"))
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark: %v: %s", err, out)
	}
	m := rpsRE.FindAllStringSubmatch(string(out), -1)
	if len(m) == 0 {
		return 0, fmt.Errorf("redis-benchmark said %q", out)
	}
	return strconv.ParseFloat(m[len(m)-1][1], 64)
}

// redisTiny: records/s end to end through the Redis door with many
// clients beside redis-benchmark's XADD rate, and the latency from XADD to
// a readable result for one client.
func (r *runner) redisTiny(model string, d time.Duration) error {
	w := r.w
	rs, err := startBenchRedis()
	if err != nil {
		return err
	}
	defer rs.stop()
	ports, err := freeport.Take(1)
	if err != nil {
		return err
	}
	respAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	c, err := r.startChild(model, map[string]string{"threadPerModel": "1", "redisUrl": rs.addr, "respListen": respAddr})
	if err != nil {
		return err
	}
	defer c.stop()
	const clients = 50
	e2e, single, before, after := clientRuns(c, rs, rs.addr, clients, d)
	const trivialStream = "bench_trivial"
	stopTrivial, err := trivialRedisDoor(rs.addr, trivialStream)
	if err != nil {
		return err
	}
	defer stopTrivial()
	trivialOp, closeTrivial := redisOp(rs.addr, trivialStream, tinyBody, "stream", 2*time.Millisecond, clients)
	defer closeTrivial()
	runLoad(8, time.Second, 500, trivialOp) // warm-up
	tBefore := snapCPU(c, rs)
	trivial := runLoad(clients, d, 0, trivialOp)
	tAfter := snapCPU(c, rs)
	xadd, err := redisBenchmarkXADD(rs.port)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "== Redis door, tiny model (serde=stream JSON records), %s per run\n", d)
	t := table{w}
	t.header()
	t.row(fmt.Sprintf("Redis door, %d clients (XADD, poll, DEL)", clients), e2e)
	fmt.Fprintf(w, "  %s\n", perRequest(before, after, e2e.n))
	t.row("Redis door, 1 client, back-to-back polls", single)
	t.row(fmt.Sprintf("trivial Redis door, %d clients (same polls)", clients), trivial)
	fmt.Fprintf(w, "  %s (the trivial door runs in the bench)\n", perRequest(tBefore, tAfter, trivial.n))
	fmt.Fprintf(w, "redis-benchmark XADD, 50 clients: %.0f req/s\n", xadd)
	fmt.Fprintf(w, "trivial Redis door (XREADGROUP, HSET, XACK+XDEL; no mesh, no model) / XADD rate: %.3f: the Redis door's ceiling\n", trivial.rate()/xadd)
	fmt.Fprintf(w, "records/s end to end / redis-benchmark XADD rate: %.3f (target >= 0.15)\n", e2e.rate()/xadd)
	fmt.Fprintf(w, "XADD to readable result, 1 client: p50 %s, p99 %s (target p50 <= 1ms)\n",
		single.pct(0.5).Round(time.Microsecond), single.pct(0.99).Round(time.Microsecond))
	respRows(w, c, rs, respAddr, clients, d)
	return nil
}

// trivialRedisDoor is the least a Redis door can do, with none of the
// mesh: one goroutine in the bench reads stream's entries in blocks with
// XREADGROUP, writes each entry's data back as its result (HSET of the
// result key the clients poll, in one pipeline) and XACKs and XDELs the
// block. With the same polling clients its rate against XADD's is the
// ceiling of the Redis door's ratio on these cores: the clients', the
// polls' and redis-server's own cost. Stop it with the returned func.
func trivialRedisDoor(addr, stream string) (func(), error) {
	rdb := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 4})
	ctx, cancel := context.WithCancel(context.Background())
	if err := rdb.XGroupCreateMkStream(ctx, stream, "trivial", "$").Err(); err != nil {
		cancel()
		_ = rdb.Close()
		return nil, fmt.Errorf("trivial Redis door: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			res, err := rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "trivial", Consumer: "c", Streams: []string{stream, ">"},
				Count: 256, Block: 100 * time.Millisecond}).Result()
			if err != nil {
				continue // goredis.Nil: nothing came within the block
			}
			p := rdb.Pipeline()
			var ids []string
			for _, s := range res {
				for _, m := range s.Messages {
					uri, _ := m.Values["uri"].(string)
					p.HSet(ctx, redisdoor.ResultKey(stream, uri), redisdoor.ResultField, m.Values["data"])
					ids = append(ids, m.ID)
				}
			}
			p.XAck(ctx, stream, "trivial", ids...)
			p.XDel(ctx, stream, ids...)
			_, _ = p.Exec(ctx)
		}
	}()
	return func() { cancel(); <-done; _ = rdb.Close() }, nil
}
