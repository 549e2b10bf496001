package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// TestRESPDoorStart runs start with respListen: the banner's redis-cli
// line runs as printed and answers PONG, and a record XADDed with
// go-redis gets its result under cluster-serving_<job>:<uri>, with no
// redis-server.
func TestRESPDoorStart(t *testing.T) {
	skipIfShort(t)
	port := freePorts(t, 1)[0]
	cfg, url, job, env := testJob(t, fmt.Sprintf("respListen: 127.0.0.1:%d\n", port))
	start := spawn(t, env, "start", "-c", cfg)
	waitReady(t, url, start)
	waitLog(t, start, "Stop with Ctrl-C")
	var line string
	for _, l := range strings.Split(start.logs(), "\n") {
		if strings.Contains(l, "redis-cli ") {
			line, _, _ = strings.Cut(strings.TrimSpace(l), "   #")
		}
	}
	if want := fmt.Sprintf("redis-cli -h 127.0.0.1 -p %d PING", port); line != want {
		t.Fatalf("banner: got %q, want %q", line, want)
	}
	words, err := shellSplit(line)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(words[0], words[1:]...).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "PONG" {
		t.Errorf("%s: got %q, %v, want PONG", line, out, err)
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.XAdd(ctx, &goredis.XAddArgs{Stream: job, Values: []any{"uri", "r1", "data", `{"instances":[{"x":[1,2,3,4]}]}`, "serde", "stream"}}).Err(); err != nil {
		t.Fatal(err)
	}
	waitProc(t, start, 30*time.Second, "the result", func() bool {
		v, err := rdb.HGet(ctx, "cluster-serving_"+job+":r1", "value").Result()
		return err == nil && strings.HasPrefix(v, "/////")
	})
}
