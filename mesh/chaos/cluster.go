package chaos

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/infer/infertest/freeport"
	"github.com/cluster-serving/cluster-serving/mesh/chaos/lazyfs"
)

// Options set up a Cluster. Zero values mean the defaults named.
type Options struct {
	Dir    string // where configs, stores and logs go (required; a temp dir)
	Bins   Binaries
	Model  string // the .onnx model (required unless Repository): add_f32 of infer/testdata
	ORTLib string // libonnxruntime.so.1, passed as onnxruntimeLib
	// Repository is a model repository served instead of Model
	// (modelRepository), and Serve the models of it each worker runs
	// (serveModels; a worker past its end runs them all): see
	// UsePipeline. The load asks the repository's model named Job.
	Repository string
	Serve      [][]string
	Job        string // jobName; default chaos<port>
	Calc       Calc   // what the model the load asks computes; default AddOne
	// ExtraConfig is appended to every process's config.yaml, to try a key
	// the code under test has grown (e.g. "jetstreamPartitions: 3").
	ExtraConfig string
	// AckWait is the config's ackWait; default 5s, so that a killed
	// worker's requests come back well within a client's 15 s.
	AckWait time.Duration
	Workers int                           // default 2
	Logf    func(format string, a ...any) // progress lines; default none
	// Routes puts a fault proxy on every route between the nats-servers
	// (netsplit.go), for partitions, latency and flapping routes.
	Routes bool
	// LazyFS puts each nats-server's store on a file system that drops
	// what was not fsynced at a power cut (disks.go).
	LazyFS bool
	// NATSSync is the servers' jetstream sync_interval; default always,
	// as deploy/ configures it.
	NATSSync string
}

// Cluster is the system under test: three nats-servers, a redis-server
// and the cluster-serving processes. Close kills every process.
type Cluster struct {
	opt      Options
	Job      string
	NATS     []*natsNode
	Redis    *Proc
	RedisURL string
	Workers  []*Proc
	HTTP     *Proc
	HTTPURL  string
	Bridge   *Proc
	// RESP is an `http` process serving the RESP door on RESPAddr.
	RESP     *Proc
	RESPAddr string
	// NATSDoor is a `cluster-serving start` process (a worker too) that
	// serves the NATS door when the workers do not (older code); nil when
	// they do.
	NATSDoor *Proc
	URLs     string // the three client URLs, comma-separated
	routes   []*routeProxy
	nc       *nats.Conn
	rdb      *goredis.Client
	procs    procSet
}

// natsNode is one nats-server of the cluster and its ports.
type natsNode struct {
	*Proc
	name                   string
	client, route, monitor int
	disk                   *lazyfs.FS // its store's file system; nil without Options.LazyFS
}

// Start brings the whole cluster up and waits until every door answers.
func Start(ctx context.Context, opt Options) (*Cluster, error) {
	if opt.AckWait == 0 {
		opt.AckWait = 5 * time.Second
	}
	if opt.Workers == 0 {
		opt.Workers = 2
	}
	if opt.Logf == nil {
		opt.Logf = func(string, ...any) {}
	}
	if opt.Calc.In == nil {
		opt.Calc = AddOne
	}
	c := &Cluster{opt: opt}
	for _, step := range []func(context.Context) error{c.startNATS, c.startRedis, c.startServing} {
		if err := step(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Close kills every process the cluster started.
func (c *Cluster) Close() {
	if c.nc != nil {
		c.nc.Close()
	}
	if c.rdb != nil {
		_ = c.rdb.Close()
	}
	c.procs.killAll()
	c.closeNet()
	c.unmountDisks()
}

func (c *Cluster) logDir() string { return filepath.Join(c.opt.Dir, "logs") }

// startNATS writes three server configs (server_name, client, route and
// monitoring ports, JetStream store) and starts them.
func (c *Cluster) startNATS(ctx context.Context) error {
	ports, err := freeport.Take(9)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.logDir(), 0o755); err != nil {
		return err
	}
	var urls []string
	for i := range 3 {
		c.NATS = append(c.NATS, &natsNode{name: fmt.Sprintf("n%d", i+1), client: ports[3*i], route: ports[3*i+1], monitor: ports[3*i+2]})
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[3*i]))
	}
	c.URLs = strings.Join(urls, ",")
	if err := c.mountDisks(); err != nil {
		return err
	}
	for i, n := range c.NATS {
		routes, extra, err := c.routesOf(i)
		if err != nil {
			return err
		}
		conf := filepath.Join(c.opt.Dir, n.name+".conf")
		text := c.pingLine() + fmt.Sprintf("server_name: %s\nlisten: 127.0.0.1:%d\nhttp: 127.0.0.1:%d\n"+
			"jetstream { store_dir: %q, max_memory_store: 256MB, max_file_store: 4GB, sync_interval: %s }\n"+
			"cluster { name: chaos, listen: 127.0.0.1:%d, routes: [%s]%s }\n",
			n.name, n.client, n.monitor, filepath.Join(c.opt.Dir, "js", n.name), cmp.Or(c.opt.NATSSync, "always"),
			n.route, strings.Join(routes, ", "), extra)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			return err
		}
		n.Proc = c.procs.add(newProc(n.name, c.logDir(), c.opt.Bins.NATSServer, nil, "-c", conf))
		if err := n.Start(); err != nil {
			return err
		}
	}
	for _, n := range c.NATS {
		if err := c.waitNATSNode(ctx, n); err != nil {
			return err
		}
	}
	c.nc, err = nats.Connect(c.URLs, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.Name("chaos harness"))
	return err
}

// waitNATSNode waits until a node's monitoring port says it is healthy
// with JetStream (/healthz?js-enabled-only=true is too weak: it answers
// before the meta group has a leader).
func (c *Cluster) waitNATSNode(ctx context.Context, n *natsNode) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", n.monitor)
	return waitFor(ctx, 60*time.Second, n.name, func() bool { return httpOK(url) })
}

func httpOK(url string) bool {
	client := http.Client{Timeout: time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitFor polls cond every 50 ms until it holds, ctx ends or d passes.
func waitFor(ctx context.Context, d time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %s after %v", errNotReady, what, d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// startRedis runs redis-server with AOF on and every write fsynced, so
// that a kill -9 loses no acknowledged write (a restart is then a clean
// test of the door, not of Redis's everysec window).
func (c *Cluster) startRedis(ctx context.Context) error {
	ports, err := freeport.Take(1)
	if err != nil {
		return err
	}
	dir := filepath.Join(c.opt.Dir, "redis")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	c.RedisURL = fmt.Sprintf("127.0.0.1:%d", ports[0])
	c.Redis = c.procs.add(newProc("redis", c.logDir(), c.opt.Bins.RedisServer, nil,
		"--port", fmt.Sprint(ports[0]), "--bind", "127.0.0.1", "--dir", dir, "--save", "",
		"--appendonly", "yes", "--appendfsync", "always"))
	if err := c.Redis.Start(); err != nil {
		return err
	}
	c.rdb = goredis.NewClient(&goredis.Options{Addr: c.RedisURL, MaxRetries: -1})
	return c.waitRedis(ctx)
}

func (c *Cluster) waitRedis(ctx context.Context) error {
	return waitFor(ctx, 30*time.Second, "redis-server", func() bool {
		return c.rdb.Ping(ctx).Err() == nil
	})
}
