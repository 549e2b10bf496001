package chaos

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/infer/infertest/freeport"
)

// config is the config.yaml of one cluster-serving process: the shared
// keys, then the role's (its metrics port; the doors' ports).
func (c *Cluster) config(name, role string) (path string, metrics int, err error) {
	ports, err := freeport.Take(1)
	if err != nil {
		return "", 0, err
	}
	text := fmt.Sprintf("%s\njobName: %s\nnatsUrl: %q\nqueueReplicas: 3\nqueueStorage: file\n"+
		"ackWait: %d\nthreadPerModel: 1\nmodelParallelism: 1\nmetricsListen: 127.0.0.1:%d\n"+
		"httpRequestTimeout: 15000\nlogLevel: info\n",
		c.modelKey(), c.Job, c.URLs, c.opt.AckWait.Milliseconds(), ports[0])
	if c.opt.ORTLib != "" {
		text += fmt.Sprintf("onnxruntimeLib: %s\n", c.opt.ORTLib)
	}
	text += role + c.opt.ExtraConfig
	if text[len(text)-1] != '\n' {
		text += "\n"
	}
	path = filepath.Join(c.opt.Dir, name+".yaml")
	return path, ports[0], os.WriteFile(path, []byte(text), 0o644)
}

// serving starts one cluster-serving process: cmd is its command (worker,
// http, bridge, start); each gets its own XDG_RUNTIME_DIR so that pid
// files of two processes of one role do not collide.
func (c *Cluster) serving(name, cmd, role string) (*Proc, error) {
	cfg, metrics, err := c.config(name, role)
	if err != nil {
		return nil, err
	}
	run := filepath.Join(c.opt.Dir, "run", name)
	if err := os.MkdirAll(run, 0o700); err != nil {
		return nil, err
	}
	p := c.procs.add(newProc(name, c.logDir(), c.opt.Bins.ClusterServing, []string{"XDG_RUNTIME_DIR=" + run}, cmd, "-c", cfg))
	p.MetricsPort = metrics
	return p, p.Start()
}

// startServing starts the workers, the HTTP door and the Redis door, then
// checks that something serves the NATS door; when the workers do not,
// it adds a `start` process for it.
func (c *Cluster) startServing(ctx context.Context) error {
	ports, err := freeport.Take(1)
	if err != nil {
		return err
	}
	c.Job = cmp.Or(c.opt.Job, "chaos"+strconv.Itoa(ports[0]))
	// One after the other: two workers that create the job's R3 streams
	// at the same moment both fail with "ensure stream ...: context
	// deadline exceeded" (seen with nats-server 2.15.2 and the code of
	// 2026-11-23); a restarted worker finds them made.
	for i := range c.opt.Workers {
		w, err := c.serving(fmt.Sprintf("worker%d", i+1), "worker", "httpPort: -1\n"+c.serveKey(i))
		if err != nil {
			return err
		}
		c.Workers = append(c.Workers, w)
		if err := c.WaitWorker(ctx, w); err != nil {
			return err
		}
	}
	c.HTTPURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	if c.HTTP, err = c.serving("http", "http", fmt.Sprintf("httpInterface: 127.0.0.1\nhttpPort: %d\n", ports[0])); err != nil {
		return err
	}
	if c.Bridge, err = c.serving("bridge", "bridge", "httpPort: -1\nredisUrl: "+c.RedisURL+"\n"); err != nil {
		return err
	}
	if err := c.startRESP(); err != nil {
		return err
	}
	if err := c.WaitHTTP(ctx); err != nil {
		return err
	}
	if err := c.WaitBridge(ctx); err != nil {
		return err
	}
	if err := c.WaitRESP(ctx); err != nil {
		return err
	}
	return c.ensureNATSDoor(ctx)
}

// ensureNATSDoor asks serving.<job>.predict once; with no responder, the
// NATS door is served by a `start` process of its own.
func (c *Cluster) ensureNATSDoor(ctx context.Context) error {
	if c.natsDoorAnswers() {
		return nil
	}
	c.opt.Logf("no worker serves serving.%s.predict: starting `cluster-serving start` as the NATS door", c.Job)
	var err error
	if c.NATSDoor, err = c.serving("natsdoor", "start", "httpPort: -1\n"); err != nil {
		return err
	}
	return c.WaitNATSDoor(ctx)
}

// WaitNATSDoor waits until serving.<job>.predict answers.
func (c *Cluster) WaitNATSDoor(ctx context.Context) error {
	return waitProc(ctx, c.NATSDoor, 60*time.Second, c.natsDoorAnswers)
}

func (c *Cluster) natsDoorAnswers() bool {
	msg, err := c.nc.Request("serving."+c.Job+".predict", c.opt.Calc.Body(0), 2*time.Second)
	return err == nil && msg.Header.Get("Nats-Service-Error-Code") == ""
}

// WaitWorker waits until the worker w is on the mesh: a micro service of
// each job it runs answers $SRV.INFO with w's pid (after its model has
// loaded).
func (c *Cluster) WaitWorker(ctx context.Context, w *Proc) error {
	jobs := c.workerJobs(w)
	return waitProc(ctx, w, 90*time.Second, func() bool {
		pid := strconv.Itoa(w.Pid())
		up := map[string]bool{}
		for _, info := range c.workerInfos(300 * time.Millisecond) {
			if info.Metadata["pid"] == pid && slices.Contains(jobs, info.Metadata["job"]) {
				up[info.Metadata["job"]] = true
			}
		}
		return len(up) == len(jobs)
	})
}

type serviceInfo struct {
	Metadata map[string]string `json:"metadata"`
}

// workerInfos gathers the INFO answers of every worker micro service.
func (c *Cluster) workerInfos(wait time.Duration) []serviceInfo {
	inbox := nats.NewInbox()
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		return nil
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.nc.PublishRequest("$SRV.INFO.cluster-serving-worker", inbox, nil); err != nil {
		return nil
	}
	var out []serviceInfo
	end := time.Now().Add(wait)
	for {
		msg, err := sub.NextMsg(time.Until(end))
		if errors.Is(err, nats.ErrTimeout) || err != nil {
			return out
		}
		var info serviceInfo
		if json.Unmarshal(msg.Data, &info) == nil {
			out = append(out, info)
		}
	}
}

// WaitHTTP waits until the HTTP door says every model is ready.
func (c *Cluster) WaitHTTP(ctx context.Context) error {
	return waitProc(ctx, c.HTTP, 60*time.Second, func() bool { return httpOK(c.HTTPURL + "/v2/health/ready") })
}

// WaitBridge waits until the Redis door has created its consumer group on
// the job's stream and (its log says) reads it, since its last start.
func (c *Cluster) WaitBridge(ctx context.Context) error {
	return waitProc(ctx, c.Bridge, 60*time.Second, func() bool {
		groups, err := c.rdb.XInfoGroups(ctx, c.Job).Result()
		return err == nil && len(groups) > 0 && c.Bridge.Alive() && c.Bridge.loggedEveryStart("serving redis stream")
	})
}

// startRESP starts the RESP door's process: `http` on a port of its own
// (the command's HTTP door, unused by the load) with respListen, so that
// killing it leaves the HTTP door alone.
func (c *Cluster) startRESP() error {
	ports, err := freeport.Take(2)
	if err != nil {
		return err
	}
	c.RESPAddr = fmt.Sprintf("127.0.0.1:%d", ports[1])
	c.RESP, err = c.serving("resp", "http", fmt.Sprintf("httpInterface: 127.0.0.1\nhttpPort: %d\nrespListen: %s\n", ports[0], c.RESPAddr))
	return err
}

// WaitRESP waits until the RESP door answers PING since its last start.
func (c *Cluster) WaitRESP(ctx context.Context) error {
	rdb := goredis.NewClient(&goredis.Options{Addr: c.RESPAddr, MaxRetries: -1})
	defer rdb.Close()
	return waitProc(ctx, c.RESP, 60*time.Second, func() bool {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return c.RESP.Alive() && rdb.Ping(pctx).Err() == nil
	})
}

// ProcessesServing lists every cluster-serving process (for the soak).
func (c *Cluster) ProcessesServing() []*Proc {
	ps := append([]*Proc{}, c.Workers...)
	ps = append(ps, c.HTTP, c.Bridge, c.RESP)
	if c.NATSDoor != nil {
		ps = append(ps, c.NATSDoor)
	}
	return ps
}

// waitProc waits until ready holds, and gives up at once when p exits.
func waitProc(ctx context.Context, p *Proc, d time.Duration, ready func() bool) error {
	var exited bool
	err := waitFor(ctx, d, p.Name, func() bool {
		exited = !p.Alive()
		return exited || ready()
	})
	if err == nil && exited {
		return fmt.Errorf("%s exited while starting: %s", p.Name, p.Logs(2000))
	}
	return err
}
