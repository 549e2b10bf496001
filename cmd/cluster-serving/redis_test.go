package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/bridge/redis"
	"github.com/cluster-serving/cluster-serving/bridge/redis/redistest"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// These tests run the real binary against a real redis-server: `start`
// (embedded NATS and a worker) with a `bridge` process, and `start` with
// its own Redis door under the Python quick start.

// pollUntil polls cond every 20ms until it holds, and fails the test when
// it still does not after d; what names the awaited state.
func pollUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func streamInfo(t *testing.T, nc *nats.Conn, name string) *jetstream.StreamInfo {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func TestBridgeKilledMidFlightLosesNothing(t *testing.T) {
	skipIfShort(t)
	raddr, rdb := redistest.Start(t)
	cfg, url, job, env := testJob(t, "")
	bridgeCfg := filepath.Join(filepath.Dir(cfg), "bridge.yaml")
	base, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bridgeCfg, append(base, "redisUrl: "+raddr+"\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	start := spawn(t, env, "start", "-c", cfg)
	nc := waitReady(t, url, start)
	bridge := spawn(t, env, "bridge", "-c", bridgeCfg, "-nats", url)
	waitLog(t, bridge, "serving redis stream")

	const total = 500
	ctx := context.Background()
	body := func(i int) string {
		f := float32(i)
		return fmt.Sprintf(`{"instances":[{"x":[%g,%g,%g,%g]}]}`, f, -f, f/4, 0.5)
	}
	// The client's XADDs, in small pipelines over about a second; the
	// bridge is killed (-9) halfway, while records are in flight.
	added := make(chan struct{})
	go func() {
		defer close(added)
		for i := 0; i < total; i += 10 {
			_, _ = rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for j := i; j < i+10; j++ {
					p.XAdd(ctx, &goredis.XAddArgs{Stream: job, Values: []any{"uri", fmt.Sprint("rec-", j), "data", body(j), "serde", "stream"}})
				}
				return nil
			})
			time.Sleep(2 * time.Millisecond)
		}
	}()
	pollUntil(t, 30*time.Second, "bridge to take records", func() bool {
		n, _ := rdb.Keys(ctx, redis.ResultKey(job, "*")).Result()
		return len(n) >= 100
	})
	_ = bridge.cmd.Process.Kill()
	<-bridge.done
	done, _ := rdb.Keys(ctx, redis.ResultKey(job, "*")).Result()
	t.Logf("killed the bridge with %d of %d results written", len(done), total)
	<-added

	bridge2 := spawn(t, env, "bridge", "-c", bridgeCfg, "-nats", url)
	// The reference: ONNX Runtime run directly, in the Redis result format.
	if err := infer.Init(requireORT(t)); err != nil {
		t.Fatal(err)
	}
	direct, err := infer.NewSession("../../infer/testdata/add_f32.onnx", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	want := func(i int) string {
		f := float32(i)
		out, err := direct.Run([]infer.Tensor{{DType: infer.Float32, Shape: []int64{1, 4}, Data: []float32{f, -f, f / 4, 0.5}}})
		if err != nil {
			t.Fatal(err)
		}
		out[0].Shape = out[0].Shape[1:]
		v, err := wire.EncodeRedisArrow(out)
		if err != nil {
			t.Fatal(err)
		}
		return string(v)
	}
	for i := range total {
		key := redis.ResultKey(job, fmt.Sprint("rec-", i))
		var got string
		pollUntil(t, 90*time.Second, key, func() bool {
			v, err := rdb.HGet(ctx, key, "value").Result()
			got = v
			return err == nil
		})
		if w := want(i); got != w {
			t.Errorf("rec-%d: got %q, want %q", i, got, w)
		}
	}
	pollUntil(t, 30*time.Second, "XLEN 0", func() bool { return rdb.XLen(ctx, job).Val() == 0 })

	// Each record was queued once and answered once.
	if work := streamInfo(t, nc, mesh.StreamName(job)); work.State.LastSeq != total {
		t.Errorf("work queue took %d messages, want %d (one per record)", work.State.LastSeq, total)
	}
	if res := streamInfo(t, nc, mesh.ResultsStreamName(job)); res.State.LastSeq != total {
		t.Errorf("results stream holds %d results, want %d (one per record)", res.State.LastSeq, total)
	}
	bridge2.signalAndWait(t, syscall.SIGTERM)
	start.signalAndWait(t, syscall.SIGTERM)
	if n := processed(t, start); n != total {
		t.Errorf("start processed=%d, want %d (each record computed once)", n, total)
	}
}

func TestPythonQuickStart(t *testing.T) {
	skipIfShort(t)
	const py = "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import redis, numpy").Run(); err != nil {
		if os.Getenv("CLUSTER_SERVING_REQUIRE_DEPS") == "1" {
			t.Fatal("python3-redis / python3-numpy missing: apt-get install python3-redis python3-numpy")
		}
		t.Skip("python3-redis / python3-numpy missing: apt-get install python3-redis python3-numpy")
	}
	_, rdb := redistest.Start(t)
	port := rdb.Options().Addr[strings.LastIndex(rdb.Options().Addr, ":")+1:]
	model, err := filepath.Abs("../../bridge/redis/testdata/image_mean.onnx")
	if err != nil {
		t.Fatal(err)
	}
	cfg, url, job, env := testJob(t, "redisUrl: "+rdb.Options().Addr+"\npostProcessing: topN(2)\nimageResize: 224,224\n")
	// testJob serves add_f32; point the config at the image model instead.
	data, _ := os.ReadFile(cfg)
	data = []byte(strings.Replace(string(data), "modelPath: ", "modelPath: "+model+"\n#", 1))
	if err := os.WriteFile(cfg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	start := spawn(t, env, "start", "-c", cfg)
	waitReady(t, url, start)

	out, err := exec.Command(py, "../../bridge/redis/examples/quick_start.py", "--host", "127.0.0.1", "--port", port, "--job", job, "--timeout", "60").CombinedOutput()
	t.Logf("quick_start.py:\n%s", out)
	if err != nil {
		t.Fatalf("quick_start.py: %v", err)
	}
	// topN(2) of the 5 class scores: [[class,score][class,score]].
	topN := regexp.MustCompile(`^\[\[\d,[0-9.E-]+\]\[\d,[0-9.E-]+\]\]$`)
	for _, img := range []string{"cat1", "dog1", "fish1"} {
		value := ""
		for _, l := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(l, img+": "); ok {
				value = v
			}
		}
		if !topN.MatchString(value) {
			t.Errorf("%s: got %q, want a topN(2) string such as [[4,0.2][3,0.19]]", img, value)
		}
	}
}
