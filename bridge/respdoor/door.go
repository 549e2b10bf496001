package respdoor

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nuid"
	"github.com/tidwall/redcon"
	"golang.org/x/sync/errgroup"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/bridge/redisdoor"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// Mesh is what the door needs from the mesh; *mesh.Client implements it.
// Its methods must be safe for concurrent use. Beside the Redis door's
// (EnqueueBatch, ConsumeResultBatches) it opens a job's result bucket and
// reads how full a job's work queue is (for INFO).
type Mesh interface {
	redisdoor.Mesh
	ResultBucket(ctx context.Context, job string, streams mesh.StreamConfig, ttl time.Duration) (*mesh.ResultBucket, error)
	QueueBytes(ctx context.Context, job string) (used, limit int64, err error)
}

// Door serves the Redis protocol on a listener (Serve) for the jobs of
// its Config. Serve it once. Its methods are safe for concurrent use.
type Door struct {
	cfg  Config
	m    Mesh
	log  *slog.Logger
	lim  *telemetry.LogLimit
	tls  *tls.Config
	auth *credentials // nil: no AUTH needed

	instance string // this process's part of every record's message id
	ids      idGen
	started  time.Time
	mem      memory

	buckets  map[string]*mesh.ResultBucket // by job; set before the first connection
	lst      *door.Listener
	inflight inflight
	clients  atomic.Int64
	conns    sync.WaitGroup // connections' goroutines (redcon's), waited for by Serve
	ps       pubsub         // SUBSCRIBE and keyspace notifications (pubsub.go, notify.go)
}

// New checks cfg, loads its TLS and password files and returns a Door;
// it connects nothing until Serve. It returns an error wrapping
// ErrInvalidConfig for a bad cfg, and a *door.FileError (see KeyError)
// for a file it cannot use.
func New(m Mesh, cfg Config) (*Door, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("%w: nil Mesh", ErrInvalidConfig)
	}
	cfg.defaults()
	tc, err := door.ServerTLS(cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile)
	if err != nil {
		return nil, err
	}
	d := &Door{cfg: cfg, m: m, tls: tc, instance: nuid.Next(), started: time.Now()}
	d.log = cfg.Logger.With("door", DoorName)
	d.lim = telemetry.NewLogLimit(d.log, 0)
	d.startNotify()
	if cfg.PasswordFile != "" {
		if d.auth, err = loadCredentials(cfg.User, cfg.PasswordFile); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// credentials are the SHA-256 of the user and of the password, so that
// AUTH compares fixed-size digests in constant time.
type credentials struct{ user, password [sha256.Size]byte }

func loadCredentials(user, file string) (*credentials, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, &door.FileError{Field: "PasswordFile", Path: file, Err: err}
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return nil, &door.FileError{Field: "PasswordFile", Path: file, Err: errors.New("is empty: it would let no client in")}
	}
	return &credentials{user: sha256.Sum256([]byte(user)), password: sha256.Sum256([]byte(pw))}, nil
}

// check reports whether user and password are the door's; both digests
// are compared whatever the first says.
func (c *credentials) check(user, password []byte) bool {
	u, p := sha256.Sum256(user), sha256.Sum256(password)
	okUser := subtle.ConstantTimeCompare(u[:], c.user[:])
	okPassword := subtle.ConstantTimeCompare(p[:], c.password[:])
	return okUser&okPassword == 1
}

// Run listens on Config.Addr and serves there until ctx ends.
func (d *Door) Run(ctx context.Context) error {
	return door.Run(ctx, d.cfg.Addr, d.Serve)
}

// Serve opens the jobs' result buckets, then serves ln and consumes the
// jobs' results until ctx ends. Then it stops accepting, answers XADDs
// that come in meanwhile with an error, lets those in flight finish
// within ShutdownGrace, closes the connections, and drains the results
// consumers. It returns an error when a bucket cannot be opened or
// serving fails.
func (d *Door) Serve(ctx context.Context, ln net.Listener) error {
	defer ln.Close()
	d.buckets = map[string]*mesh.ResultBucket{}
	for _, job := range d.cfg.Jobs {
		b, err := d.m.ResultBucket(ctx, job, d.cfg.Streams, d.cfg.ResultTTL)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("resp door: %w", err)
		}
		d.buckets[job] = b
	}
	defer d.cfg.Metrics.OpenDoor(telemetry.DoorRESP, ln.Addr().String())()
	d.lst = door.NewListener(ln, d.cfg.MaxConnections)
	var l net.Listener = d.lst
	if d.tls != nil {
		l = tls.NewListener(l, d.tls)
	}
	srv := redcon.NewServerNetwork("tcp", "", d.handle, d.accept, d.closed)
	srv.SetIdleClose(d.cfg.IdleTimeout)
	g, gctx := errgroup.WithContext(context.WithoutCancel(ctx))
	results, stopResults := context.WithCancel(gctx)
	defer stopResults()
	for _, job := range d.cfg.Jobs {
		g.Go(func() error {
			return d.m.ConsumeResultBatches(results, job, d.cfg.Durable, DoorName, d.cfg.Batch,
				func(ctx context.Context, rs []mesh.Result) error { return d.putResults(ctx, job, rs) })
		})
		g.Go(func() error { return d.watch(results, job) })
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(&connListener{Listener: l, d: d}) }()
	d.log.Info("RESP door listening", "addr", ln.Addr().String(), "jobs", d.cfg.Jobs, "tls", d.tls != nil, "auth", d.auth != nil)
	door.WarnIfOpenKeys(d.log, "RESP door", ln.Addr(), d.auth == nil && (d.tls == nil || d.tls.ClientCAs == nil), "respPasswordFile (and respTlsCert/respTlsKey)")
	var err error
	select {
	case err = <-errc: // the listener failed
		err = fmt.Errorf("resp door: serve: %w", cmp.Or(err, net.ErrClosed))
	case <-ctx.Done():
	case <-gctx.Done(): // a results consumer could not start: its error below
	}
	if err == nil {
		d.drain()
		_ = srv.Close()
		<-errc
	}
	d.ps.close()   // the SUBSCRIBEd ones, which redcon let go
	d.conns.Wait() // closed by redcon as it stopped: their reads fail
	stopResults()
	if gerr := g.Wait(); err == nil {
		err = gerr
	}
	d.lim.Flush(context.WithoutCancel(ctx))
	return err
}

// watch keeps job's bucket's index (mesh.ResultBucket.Watch) while ctx
// lasts, starting it again after an error: without it every poll asks
// JetStream, slower but as right.
func (d *Door) watch(ctx context.Context, job string) error {
	for ctx.Err() == nil {
		if err := d.buckets[job].Watch(ctx); err != nil {
			d.lim.Log(ctx, slog.LevelWarn, "watching the result bucket; polls ask JetStream meanwhile", err, "job", job)
			t := time.NewTimer(time.Second)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
	}
	return nil
}

// drain stops new XADDs and waits, at most ShutdownGrace, for those in
// flight to be answered.
func (d *Door) drain() {
	t := time.NewTimer(d.cfg.ShutdownGrace)
	defer t.Stop()
	select {
	case <-d.inflight.close():
	case <-t.C:
		d.log.Warn("RESP door: XADDs still in flight at the end of the grace period; their clients see the connection close")
	}
}

// inflight counts the XADDs being stored; once closed it admits none.
type inflight struct {
	mu     sync.Mutex
	n      int
	closed bool
	zero   chan struct{}
}

// begin admits one XADD; false once closed.
func (f *inflight) begin() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.n++
	return true
}

func (f *inflight) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.closed && f.n == 0 {
		close(f.zero)
	}
}

// close admits no more and returns a channel closed once none is in
// flight. Call it once.
func (f *inflight) close() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed, f.zero = true, make(chan struct{})
	if f.n == 0 {
		close(f.zero)
	}
	return f.zero
}
