package serving

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/metric"
	"golang.org/x/sync/errgroup"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// DefaultName names the NATS connection of a Config without Name.
const DefaultName = "cluster-serving"

// Config configures a Node. The zero value, with Models set, means all
// defaults: an embedded NATS server and a door-only node that ensures the
// models' streams and offers a mesh.Client.
type Config struct {
	// URL is the external NATS server(s), comma-separated; it may hold a
	// user and password (nats://user:password@host), which logs and
	// errors redact. Empty: NewNode runs an embedded server configured by
	// Embedded.
	URL string
	// Auth is how the connection authenticates to URL and checks its
	// certificate. On the embedded server, the process gets in with an
	// identity of the server's own (see startEmbedded); Auth is used only when
	// the server cannot make one. Default: none.
	Auth NATSAuth
	// Embedded configures the embedded server when URL is empty
	// (embedded's defaults for zero fields).
	Embedded embedded.Config
	// Name names the NATS connection. Default "cluster-serving".
	Name string
	// Models lists the process's models, the default model first; each
	// Job gets its streams. Required, unless Repository.Dir is set, which
	// excludes it.
	Models []Model
	// Repository serves the models of a model repository instead of
	// Models, loading new versions as they appear (see Repository).
	Repository RepositoryConfig
	// Serve loads every model and runs its worker: a Unit per model
	// (start, worker).
	Serve bool
	// Describe, for a node that does not Serve, reads each model's inputs
	// and outputs once, for a door that lists them (http).
	Describe bool
	// Service runs the NATS door (mesh.Service) for every model's job.
	// Any number of nodes may: they form one queue group, so each request
	// on serving.<job>.predict reaches one of them, and one stopping
	// leaves the others answering. A request's waiter lives in the node
	// that took it, so a node killed hard loses the NATS requests it
	// holds: cmd turns the door on in the door processes (start, http,
	// bridge), not in workers, which are the processes scaled and killed.
	Service bool
	// Unit configures every Unit (Serve) but for Model, Version, Logger
	// and Metrics, which the node sets. Its Stream (Job set per model) is
	// also what a door-only node ensures, and its ShutdownGrace is the
	// node's drain grace.
	Unit UnitConfig
	// Version is the SemVer the NATS door and the workers announce.
	// Default 0.0.0.
	Version string
	// Coalesce is the most requests the doors of the node store in one
	// work message (mesh.ClientConfig.Coalesce). Default 64; 1: each alone.
	Coalesce int
	// Library and LibraryEnv find ONNX Runtime when the node loads or
	// describes models (see InitRuntime): the config key onnxruntimeLib
	// and the value of $ONNXRUNTIME_LIB, which the caller reads.
	Library, LibraryEnv string
	// Logger receives the node's lines (server started, stopping) and is
	// passed to the units. Default slog.Default().
	Logger *slog.Logger
	// Metrics records the units' figures, the NATS door's requests and,
	// for a serving node, the queue depths at each scrape; nil records none.
	Metrics *telemetry.Metrics
}

// Validate reports the first invalid field, wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	switch {
	case c.Repository.Dir != "" && len(c.Models) > 0:
		return fmt.Errorf("%w: Models and Repository.Dir exclude each other", ErrInvalidConfig)
	case c.Repository.Dir != "":
		if err := mesh.ValidateJob(c.Repository.Job); err != nil {
			return fmt.Errorf("%w: Repository.Job: %w", ErrInvalidConfig, err)
		}
		if err := c.Repository.validate(); err != nil {
			return err
		}
	case len(c.Models) == 0:
		return fmt.Errorf("%w: Models is empty", ErrInvalidConfig)
	}
	for _, m := range c.Models {
		if err := mesh.ValidateJob(m.Job); err != nil {
			return fmt.Errorf("%w: Models: %s: %w", ErrInvalidConfig, m.Name, err)
		}
	}
	return nil
}

// unit is the UnitConfig of model m.
func (c Config) unit(m Model) UnitConfig {
	u := c.Unit
	u.Model, u.Version, u.Logger, u.Metrics = m, c.Version, c.Logger, c.Metrics
	u.Steps.Coalesce = cmp.Or(u.Steps.Coalesce, c.Coalesce)
	return u
}

// stream is the StreamConfig of job.
func (c Config) stream(job string) mesh.StreamConfig {
	s := c.Unit.Stream
	s.Job = job
	return s
}

// Node is the mesh side of one process: the embedded NATS server (when
// Config.URL is empty), the connection, the jobs' streams, the Units of a
// serving node, a mesh.Client for the doors, the NATS door when asked,
// readiness and the queue-depth gauges. Doors other than NATS are the
// caller's: it starts them on Client and Models.
//
// NewNode builds it, Run serves until ctx ends, Close releases it in order:
// the connection drains, the embedded server stops, the engines close.
// Its methods are safe for concurrent use; Run it once.
type Node struct {
	cfg    Config
	log    *slog.Logger
	models []Model
	units  []*Unit
	repo   *Repository // nil without Config.Repository
	js     jetstream.JetStream
	srv    *embedded.Server
	nc     *nats.Conn
	client *mesh.Client
	svc    *mesh.Service
	queues metric.Registration
	// doorConns are the doors' own connections (see openDoorConns); dial
	// opens one more connection like nc.
	doorConns []*nats.Conn
	dial      func() (*nats.Conn, error)

	probed    atomic.Bool   // the NATS door answers (or there is none)
	ready     chan struct{} // closed once probed
	connClose chan struct{} // closed when the connection has closed
	closeOnce sync.Once
	closeErr  error
}

// NewNode validates cfg and builds the node: the models first (loaded, or
// described), so that a bad model directory fails before anything
// listens; then the embedded server, the connection, each job's streams
// and consumer, the client and the NATS door. Nothing serves until Run.
// On error it releases what it built and returns ErrInvalidConfig, a model
// error naming the model when there are several, or a NATS error.
func NewNode(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	n := &Node{cfg: cfg, log: cfg.Logger, ready: make(chan struct{}), connClose: make(chan struct{})}
	if err := n.start(ctx); err != nil {
		_ = n.Close()
		return nil, err
	}
	return n, nil
}

func (n *Node) start(ctx context.Context) error {
	if err := n.loadModels(); err != nil {
		return err
	}
	if err := n.connect(); err != nil {
		return err
	}
	js, err := jetstream.New(n.nc)
	if err != nil {
		return err
	}
	n.js = js
	if n.srv != nil && n.cfg.Embedded.ConfigFile != "" {
		// An account without JetStream is a config to fix, not an
		// outage to wait out as EnsureStreams would.
		if _, err := js.AccountInfo(ctx); errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			return n.refused(err)
		}
	}
	// Streams exist before a door opens, so its first publish lands.
	for _, m := range n.models {
		if err := mesh.EnsureStreams(ctx, js, n.cfg.stream(m.Job)); err != nil {
			return n.refused(err)
		}
	}
	doorNC, more, err := n.openDoorConns()
	if err != nil {
		return err
	}
	if n.client, err = mesh.NewClient(doorNC, mesh.ClientConfig{Coalesce: n.cfg.Coalesce, Local: true}); err != nil {
		return err
	}
	if n.cfg.Service {
		jobs := make([]string, len(n.models))
		for i, m := range n.models {
			jobs[i] = m.Job
		}
		n.svc, err = mesh.NewService(doorNC, n.client, mesh.ServiceConfig{Jobs: jobs, Version: n.cfg.Version, Metrics: n.cfg.Metrics, Conns: more, Queue: n.QueueOf})
		if err != nil {
			return err
		}
	}
	if n.cfg.Serve && n.cfg.Metrics != nil {
		return n.observeQueues(js)
	}
	return nil
}

// loadModels loads a Unit per model (Serve), or reads each model's
// description (Describe), or takes the models as they are.
func (n *Node) loadModels() error {
	n.models = append([]Model(nil), n.cfg.Models...)
	if !n.cfg.Serve && !n.cfg.Describe {
		if n.cfg.Repository.Dir != "" {
			return fmt.Errorf("%w: a model repository needs a node that serves or describes models", ErrInvalidConfig)
		}
		return nil
	}
	if err := InitRuntime(n.cfg.Library, n.cfg.LibraryEnv); err != nil {
		return err
	}
	if n.cfg.Repository.Dir != "" {
		repo, err := newRepository(n, n.cfg.Repository)
		if err != nil {
			return err
		}
		n.repo, n.models = repo, repo.Models()
		return nil
	}
	for i, m := range n.models {
		if !n.cfg.Serve {
			// What the workers decide, given the same keys.
			described, err := describeModel(m, nil, n.cfg.Unit.Engine)
			if err != nil {
				return fmt.Errorf("model %s version %s: %w", m.Name, m.Version, err)
			}
			n.models[i] = described
			continue
		}
		u, err := NewUnit(n.cfg.unit(m))
		if err != nil {
			if len(n.models) > 1 {
				return fmt.Errorf("model %s version %s: %w", m.Name, m.Version, err)
			}
			return err
		}
		n.units = append(n.units, u)
		n.models[i] = u.Model()
	}
	return nil
}

// connect starts the embedded server when there is no URL, and connects.
// NATS connection settings of every node; see connect.
const (
	reconnectWait   = 250 * time.Millisecond
	reconnectJitter = 100 * time.Millisecond
	pingInterval    = 5 * time.Second
)

func (n *Node) connect() error {
	opts := []nats.Option{
		nats.Name(cmp.Or(n.cfg.Name, DefaultName)),
		nats.MaxReconnects(-1),
		// Failover settings (docs/design.md "Failover"): reconnect to another
		// server within a quarter second, not nats.go's 2 s, so a door
		// whose server dies resumes inside the 2 s target; notice a dead
		// machine or a split in about 10 s, not 4 minutes; start while
		// one server of the list is down. The reconnect buffer keeps its
		// 8 MiB default: acks and heartbeats sent meanwhile wait in it,
		// and doors do not publish while disconnected.
		nats.ReconnectWait(reconnectWait),
		nats.ReconnectJitter(reconnectJitter, reconnectJitter),
		nats.PingInterval(pingInterval),
		nats.MaxPingsOutstanding(2),
		nats.RetryOnFailedConnect(true),
	}
	url := n.cfg.URL
	if url == "" {
		self, err := n.startEmbedded()
		if err != nil {
			return err
		}
		url, opts = "", append(opts, self...)
	} else {
		opts = append(opts, n.cfg.Auth.Options()...)
	}
	n.dial = func() (*nats.Conn, error) { return nats.Connect(url, opts...) }
	nc, err := nats.Connect(url, append(opts, nats.ClosedHandler(func(*nats.Conn) { close(n.connClose) }))...)
	if err != nil {
		return ConnectError(n.URL(), err)
	}
	n.nc = nc
	return nil
}

// openDoorConns gives the doors of a node that runs the NATS door NATS
// connections of their own on 4 cores or more, one per 4 cores: the
// first carries the Client (stores, PubAcks, the HTTP door's answers),
// and the NATS door's endpoint subscribes on each. On one connection a
// 16-core node read every request, PubAck, pulled record and answer in
// one goroutine on either side (issue 23). It returns the Client's
// connection and the others.
func (n *Node) openDoorConns() (*nats.Conn, []*nats.Conn, error) {
	k := runtime.GOMAXPROCS(0) / 4
	if !n.cfg.Service || k == 0 {
		return n.nc, nil, nil
	}
	for range k {
		nc, err := n.dial()
		if err != nil {
			return nil, nil, ConnectError(n.URL(), err)
		}
		n.doorConns = append(n.doorConns, nc)
	}
	return n.doorConns[0], n.doorConns[1:], nil
}

// startEmbedded starts the embedded server and returns the options of
// the node's in-process connection to it.
//
// On a server that requires authentication, the connection presents the
// identity the server made for its own process (embedded's in-process
// user: accepted only in process, random, in the account the file's
// users share), so that start needs no secret of its own and the
// nats-server file stays the one authority on who may connect. Where the
// server cannot make one (operator JWTs, an auth callout, a bcrypt
// token, users in several accounts), the connection uses Auth, the same
// credentials the other commands use, and NewNode fails at once, naming
// the keys, when Auth has none.
func (n *Node) startEmbedded() ([]nats.Option, error) {
	ecfg := n.cfg.Embedded
	if ecfg.Logger == nil {
		// nats-server's warnings and errors (a store that latched a write
		// error, JetStream restarted on it) reach the node's log; its
		// notices stay out.
		ecfg.Logger = telemetry.AtLeast(n.log, slog.LevelWarn).With("component", "nats-server")
	}
	srv, err := embedded.Start(ecfg)
	if err != nil {
		return nil, err
	}
	n.srv = srv
	n.log.Info("embedded NATS server started", "url", telemetry.RedactURL(srv.ClientURL()), "store", srv.StoreDir(),
		"fsync", srv.Sync(), "auth", srv.AuthRequired())
	opts := []nats.Option{srv.ConnectOption()}
	if srv.InProcessAuth() {
		return append(opts, n.cfg.Auth.Inbox()), nil
	}
	if !n.cfg.Auth.Identity() {
		return nil, fmt.Errorf("%w: the embedded NATS server (natsServerConfig) requires authentication it cannot grant this process "+
			"(operator JWTs, an auth callout, a bcrypt token, or users in several accounts): set %s", ErrNATSAuth, authKeys)
	}
	return append(opts, n.cfg.Auth.Options()...), nil
}

// refused explains err when it comes from NATS refusing the node's
// credentials: the connection retries a failed connect in the
// background, so the refusal surfaces as the first request failing.
// An account of a nats-server config without JetStream is named too:
// with accounts, nats-server enables JetStream per account only.
func (n *Node) refused(err error) error {
	if last := n.nc.LastError(); errors.Is(last, nats.ErrAuthorization) {
		return ConnectError(n.URL(), last)
	}
	if errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) && n.cfg.URL == "" && n.cfg.Embedded.ConfigFile != "" {
		return fmt.Errorf("%w: the service's account in natsServerConfig needs `jetstream: enabled`", err)
	}
	return err
}

// AuthRequired reports whether the node's NATS server asks clients to
// authenticate, as its INFO says (the embedded server's own rule when
// it runs one).
func (n *Node) AuthRequired() bool {
	if n.srv != nil {
		return n.srv.AuthRequired()
	}
	return n.nc != nil && n.nc.AuthRequired()
}

// PasswordAuth reports whether the node's clients authenticate with a
// user and password (or a token): the embedded server's users or token;
// for an external NATS, its demand for authentication when Auth offers
// neither credentials nor a client certificate.
func (n *Node) PasswordAuth() bool {
	if n.srv != nil {
		return n.srv.PasswordAuth()
	}
	return n.AuthRequired() && n.cfg.Auth.Credentials == "" && n.cfg.Auth.TLSCert == ""
}

// observeQueues reports the work queues' depth at each scrape: messages
// waiting (pending) and delivered but not yet acknowledged (ack pending),
// per job, from the shared consumer's info. These are the gauges to
// autoscale workers on.
func (n *Node) observeQueues(js jetstream.JetStream) error {
	reg, err := n.cfg.Metrics.ObserveQueues(func(ctx context.Context) ([]telemetry.QueueDepth, error) {
		models := n.Models()
		out := make([]telemetry.QueueDepth, 0, len(models))
		for _, m := range models {
			info, err := mesh.WorkersInfo(ctx, js, m.Job)
			if err != nil {
				return nil, err
			}
			out = append(out, telemetry.QueueDepth{Job: m.Job, Pending: int64(info.NumPending), AckPending: int64(info.NumAckPending)})
		}
		return out, nil
	})
	n.queues = reg
	return err
}

// URL is the NATS URL the node joined: the embedded server's, or
// Config.URL. Config.URL may hold a password: print it through RedactURL.
func (n *Node) URL() string {
	if n.srv != nil {
		return n.srv.ClientURL()
	}
	return n.cfg.URL
}

// Conn is the node's NATS connection. The node owns it; do not close it.
func (n *Node) Conn() *nats.Conn { return n.nc }

// Client is the mesh.Client doors submit through. The node owns it and
// closes it in Close, after the connection drained.
func (n *Node) Client() *mesh.Client { return n.client }

// Models lists the node's models, the default first, with their
// descriptions when the node serves or describes them. With a model
// repository, the models that serve now, at the version that serves.
func (n *Node) Models() []Model {
	if n.repo != nil {
		return n.repo.Models()
	}
	return n.models
}

// QueueOf is the queue settings of job's model (the NATS door places a
// caller's priority and timeout in them); none for a job it does not know.
func (n *Node) QueueOf(job string) modelconfig.Queue {
	for _, m := range n.Models() {
		if m.Job == job {
			return m.QueueSettings() // per NATS request: no config copy
		}
	}
	return modelconfig.Queue{}
}

// Units lists the units of a serving node; none for a door-only node.
// With a model repository, the units that serve now.
func (n *Node) Units() []*Unit {
	if n.repo != nil {
		return n.repo.units()
	}
	return n.units
}

// Repository is the node's model repository; nil without one.
func (n *Node) Repository() *Repository { return n.repo }

// ensureStreams ensures job's streams (a model new to the repository).
func (n *Node) ensureStreams(ctx context.Context, job string) error {
	if err := mesh.EnsureStreams(ctx, n.js, n.cfg.stream(job)); err != nil {
		return n.refused(err)
	}
	return nil
}

// Ready reports whether the node serves: connected, the NATS door
// answering (when it runs one) and every unit's worker running. Doors use
// it for their readiness routes.
func (n *Node) Ready() bool {
	if n.nc == nil || !n.nc.IsConnected() || !n.probed.Load() {
		return false
	}
	for _, u := range n.units {
		if !u.Ready() {
			return false
		}
	}
	return n.repo == nil || n.repo.Ready()
}

// WaitReady blocks until Run has started serving (for a node with the NATS
// door: until the door answers a ping) or ctx ends, and returns ctx's error
// in that case.
func (n *Node) WaitReady(ctx context.Context) error {
	select {
	case <-n.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run serves until ctx ends: the units' workers, the NATS door and the
// readiness probe. When ctx ends, a cause of ErrStopNow closes the engines
// at once (in-flight requests go back to the queue); any other cause lets
// the workers drain within ShutdownGrace. Run returns once every part has
// stopped, nil or the first error that stopped it; then call Close.
func (n *Node) Run(ctx context.Context) error {
	stop, err := mesh.RegisterProcess(n.nc, mesh.ProcessConfig{Name: cmp.Or(n.cfg.Name, DefaultName), Version: n.cfg.Version,
		Tally: n.cfg.Metrics.Tally(), Models: n.modelStates})
	if err != nil {
		return err
	}
	defer stop()
	g, gctx := errgroup.WithContext(ctx)
	for _, u := range n.units {
		g.Go(func() error { return u.Run(gctx, n.nc) })
	}
	if n.repo != nil {
		g.Go(func() error { return n.repo.Run(gctx, n.nc) })
	}
	if n.svc != nil {
		g.Go(func() error { return n.svc.Run(gctx) })
	}
	g.Go(func() error {
		n.probe(gctx)
		return nil
	})
	stream := "" // the meta group's view, without a model
	if ms := n.Models(); len(ms) > 0 {
		stream = mesh.StreamName(ms[0].Job) // partition 0 of the first job's work queue
	}
	for _, nc := range append([]*nats.Conn{n.nc}, n.doorConns...) {
		g.Go(func() error {
			mesh.KeepReachable(gctx, nc, stream, n.log) // a server cut off from its cluster: move
			return nil
		})
	}
	g.Go(func() error {
		<-gctx.Done()
		n.stopping(context.Cause(ctx))
		return nil
	})
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// modelStates are the models the node tells the status page about: its
// repository's index, or the models its units serve (READY); none for a
// node that serves no model (a door's).
func (n *Node) modelStates() []mesh.ModelState {
	if n.repo != nil {
		return n.repo.Index(false)
	}
	var out []mesh.ModelState
	for _, u := range n.Units() {
		m := u.Model()
		out = append(out, mesh.ModelState{Name: m.Name, Version: cmp.Or(m.Version, "1"), State: StateReady})
	}
	return out
}

// Status is the whole mesh's status document (mesh.TakeStatus), as this
// node's connection sees it.
func (n *Node) Status(ctx context.Context) (*mesh.Status, error) {
	return mesh.TakeStatus(ctx, n.nc, n.js)
}

// probe marks the node probed once its own NATS door answers a ping (or
// at once without a door) and every unit's worker runs, so that
// WaitReady never returns before Ready holds. It pings its instance by
// id: other processes of the mesh answer the service's name before this
// one serves.
func (n *Node) probe(ctx context.Context) {
	pinged := n.svc == nil
	for ctx.Err() == nil {
		if !pinged {
			if id := n.svc.ID(); id != "" {
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				_, err := n.nc.RequestWithContext(pctx, "$SRV.PING."+mesh.ServiceName+"."+id, nil)
				cancel()
				pinged = err == nil
			}
		}
		if pinged && n.unitsRunning() {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	if ctx.Err() == nil {
		n.probed.Store(true)
		close(n.ready)
	}
}

// unitsRunning reports whether every unit started at Run serves, the
// model repository's too.
func (n *Node) unitsRunning() bool {
	for _, u := range n.units {
		if !u.Ready() {
			return false
		}
	}
	return n.repo == nil || n.repo.Ready()
}

// stopping logs how the node stops and, for ErrStopNow, closes the
// engines so that in-flight requests fail over to the queue (the workers
// nak them; JetStream redelivers).
func (n *Node) stopping(cause error) {
	grace := cmp.Or(n.cfg.Unit.ShutdownGrace, mesh.DefaultShutdownGrace)
	asked := errors.Is(cause, ErrStopNow) || errors.Is(cause, ErrShutdown)
	switch {
	case asked && len(n.Units()) == 0:
		n.log.Info("stopping: finishing the work in flight", "grace", grace)
	case errors.Is(cause, ErrStopNow):
		n.log.Info("stopping now: in-flight requests go back to the queue")
		n.StopNow()
	case asked:
		n.log.Info("shutting down: finishing in-flight requests", "grace", grace)
	}
}

// StopNow closes every unit's engine: requests in them go back to the
// queue. Run then returns once the workers have handed them back.
func (n *Node) StopNow() {
	for _, u := range n.units {
		u.StopNow()
	}
	if n.repo != nil {
		n.repo.StopNow()
	}
}

// Close releases the node once Run has returned (or when Run never ran):
// it stops the queue gauges, drains the connection so that acks and
// results still buffered reach the server, closes the client, stops the
// embedded server and closes the engines. It is idempotent and returns
// the engines' close errors.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		if n.queues != nil {
			_ = n.queues.Unregister()
		}
		for _, nc := range n.doorConns {
			_ = nc.Drain() // bounded by the drain timeout; Close waits no more
		}
		if n.nc != nil {
			if err := n.nc.Drain(); err == nil {
				<-n.connClose // bounded by the connection's drain timeout
			} else if !errors.Is(err, nats.ErrConnectionClosed) {
				n.log.Warn("nats drain", "err", err)
			}
		}
		if n.client != nil {
			_ = n.client.Close()
		}
		for _, nc := range n.doorConns {
			nc.Close()
		}
		if n.nc != nil {
			n.nc.Close()
		}
		if n.srv != nil {
			n.srv.Shutdown()
		}
		var errs []error
		for _, u := range n.units {
			errs = append(errs, u.Close())
		}
		if n.repo != nil {
			errs = append(errs, n.repo.Close())
		}
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}
