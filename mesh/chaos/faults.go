package chaos

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Scenario is one fault: Fault injects it and returns once the system is
// whole again (the killed process restarted and ready), with a note naming
// what it hit. Exempt lists the doors whose own path the fault takes away
// (Redis for a Redis restart): their gap is reported but has no target.
type Scenario struct {
	Name   string
	Exempt []Door
	Fault  func(ctx context.Context, c *Cluster, l *Load) (note string, err error)
	// GapTarget bounds the longest gap of the doors the fault leaves
	// alone; default GapTarget (2 s, a kill). A partition's is 5 s.
	GapTarget time.Duration
}

// WorkerKill kills a worker with kill -9 just after a burst on every door,
// so that it dies holding a batch, and starts it again after a second.
func WorkerKill(i int) Scenario {
	return Scenario{Name: "worker kill -9", Fault: func(ctx context.Context, c *Cluster, l *Load) (string, error) {
		w := c.Workers[i]
		l.Burst(30)
		time.Sleep(30 * time.Millisecond)
		return w.Name, c.killWorker(ctx, w)
	}}
}

// killWorker kills w with kill -9, starts it again after a second and
// waits until it is back on the mesh.
func (c *Cluster) killWorker(ctx context.Context, w *Proc) error {
	w.Kill()
	time.Sleep(time.Second)
	if err := w.Start(); err != nil {
		return err
	}
	return c.WaitWorker(ctx, w)
}

// DoorKill kills the HTTP, Redis, RESP or NATS door's process (kill -9)
// and starts it again at once.
func DoorKill(d Door) Scenario {
	s := Scenario{Name: d.String() + " door kill -9", Exempt: []Door{d}}
	s.Fault = func(ctx context.Context, c *Cluster, _ *Load) (string, error) {
		p, wait := c.HTTP, c.WaitHTTP
		switch d {
		case DoorRedis:
			p, wait = c.Bridge, c.WaitBridge
		case DoorRESP:
			p, wait = c.RESP, c.WaitRESP
		case DoorNATS:
			p, wait = c.NATSDoor, c.WaitNATSDoor
		}
		p.Kill()
		if err := p.Start(); err != nil {
			return p.Name, err
		}
		return p.Name, wait(ctx)
	}
	return s
}

// NATSKill kills one nats-server with kill -9, leaves it down for down,
// then starts it again: the first call takes the leader of the job's work
// queue stream, later calls the nodes not taken yet.
func NATSKill(down time.Duration) Scenario {
	var taken []string
	return Scenario{Name: "nats kill -9", Fault: func(ctx context.Context, c *Cluster, _ *Load) (string, error) {
		leader, streams := c.WorkLeader(ctx)
		var n *natsNode
		for _, cand := range c.NATS {
			if !slices.Contains(taken, cand.name) && (n == nil || cand.name == leader) {
				n = cand
			}
		}
		if n == nil {
			return "", fmt.Errorf("every node was killed already")
		}
		taken = append(taken, n.name)
		note := n.name
		if n.name == leader {
			note += " (leader of " + strings.Join(streams, ",") + ")"
		}
		n.Kill()
		time.Sleep(down)
		if err := n.Start(); err != nil {
			return note, err
		}
		return note, c.waitNATSNode(ctx, n)
	}}
}

// WorkLeader names the server that leads the job's work queue stream(s):
// every stream SERVING_<job>* but the results, and with several (the
// partitions of a queue), the leader of the first by name and the
// streams it leads.
func (c *Cluster) WorkLeader(ctx context.Context) (leader string, streams []string) {
	js, err := jetstream.New(c.nc)
	if err != nil {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		if strings.HasPrefix(name, "SERVING_"+c.Job) && !strings.HasSuffix(name, "_RESULTS") {
			streams = append(streams, name)
		}
	}
	slices.Sort(streams)
	var led []string // the streams leader leads
	for _, name := range streams {
		s, err := js.Stream(ctx, name)
		if err != nil {
			continue
		}
		if info, err := s.Info(ctx); err == nil && info.Cluster != nil && info.Cluster.Leader != "" {
			if leader == "" {
				leader = info.Cluster.Leader
			}
			if info.Cluster.Leader == leader {
				led = append(led, name)
			}
		}
	}
	return leader, led
}

// NATSClusterRestart kills all three nats-servers with kill -9 and starts
// them again after a second. Every door depends on NATS: no gap target.
func NATSClusterRestart() Scenario {
	return Scenario{Name: "nats cluster kill -9 + restart", Exempt: allDoors(),
		Fault: func(ctx context.Context, c *Cluster, _ *Load) (string, error) {
			for _, n := range c.NATS {
				n.Kill()
			}
			time.Sleep(time.Second)
			for _, n := range c.NATS {
				if err := n.Start(); err != nil {
					return "", err
				}
			}
			for _, n := range c.NATS {
				if err := c.waitNATSNode(ctx, n); err != nil {
					return "", err
				}
			}
			return "", nil
		}}
}

// RedisRestart kills redis-server with kill -9 and starts it again on its
// AOF after a second.
func RedisRestart() Scenario {
	return Scenario{Name: "redis kill -9 + restart (AOF)", Exempt: []Door{DoorRedis},
		Fault: func(ctx context.Context, c *Cluster, _ *Load) (string, error) {
			c.Redis.Kill()
			time.Sleep(time.Second)
			if err := c.Redis.Start(); err != nil {
				return "", err
			}
			return "", c.waitRedis(ctx)
		}}
}

// RedisMaxmemory sets maxmemory below what Redis uses, so that every write
// (the clients' XADD, the door's HSET) is refused with OOM, for hold; then
// lifts the limit.
func RedisMaxmemory(hold time.Duration) Scenario {
	return Scenario{Name: "redis at maxmemory", Exempt: []Door{DoorRedis},
		Fault: func(ctx context.Context, c *Cluster, _ *Load) (string, error) {
			used, err := c.redisUsedMemory(ctx)
			if err != nil {
				return "", err
			}
			limit := max(used/2, 1)
			if err := c.rdb.ConfigSet(ctx, "maxmemory", strconv.FormatInt(limit, 10)).Err(); err != nil {
				return "", err
			}
			time.Sleep(hold)
			return fmt.Sprintf("maxmemory %d B for %v", limit, hold), c.rdb.ConfigSet(ctx, "maxmemory", "0").Err()
		}}
}

func (c *Cluster) redisUsedMemory(ctx context.Context) (int64, error) {
	info, err := c.rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no used_memory in INFO memory")
}

// Garbage runs bad clients on every door (malformed JSON to HTTP and NATS,
// entries that are not base64 Arrow to Redis), clients of them per door,
// each as fast as its answers come, for d beside the good load.
func Garbage(clients int, d time.Duration) Scenario {
	return Scenario{Name: "garbage at full speed", Fault: func(ctx context.Context, _ *Cluster, l *Load) (string, error) {
		gctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		l.Garbage(gctx, clients)
		<-gctx.Done()
		return fmt.Sprintf("%d clients per door, %v", clients, d), nil
	}}
}
