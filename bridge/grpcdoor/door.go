package grpcdoor

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// Submitter and Model are the doors' (see package door).
type (
	Submitter = door.Submitter
	Model     = door.Model
)

// Defaults applied by Config for zero fields.
const (
	DefaultRequestTimeout = door.DefaultRequestTimeout
	DefaultMaxRecvBytes   = door.DefaultMaxBodyBytes
	DefaultShutdownGrace  = door.DefaultShutdownGrace
)

// Config configures a Door. The zero value, with Addr and Models (or
// Catalog) set, means all defaults.
//
// Of the fields it shares with the HTTP door (door.Config): Addr is
// required, the door is off unless asked for (config key grpcPort); a
// ModelInfer past RequestTimeout is answered DeadlineExceeded (a shorter
// client deadline wins); one that gets no token within
// TokenAcquireTimeout, ResourceExhausted; ServerReady and ModelReady
// answer false until Ready is true; Version is what ServerMetadata
// reports. With TokenFile every RPC but the health probes (ServerLive,
// ServerReady, grpc.health.v1) and server reflection needs the metadata
// "authorization: Bearer <one of its tokens>", or gets Unauthenticated,
// checked when the call's headers arrive, before its message is read.
// Conns.IdleTimeout is keepalive's MaxConnectionIdle, and past
// Conns.MaxConnections the door sheds its longest-idle connection (no
// RPC in flight) or refuses the new one; ReadTimeout and WriteTimeout
// are the HTTP door's only.
type Config struct {
	door.Config
	// Catalog, when set, lists the served models instead of Models, at
	// every call: models a model repository loads after start serve at
	// once, unloaded ones answer NotFound with the reason.
	Catalog door.Catalog
	// MaxRecvBytes bounds a request message (grpc.MaxRecvMsgSize); a
	// larger one gets ResourceExhausted. Default 16 MiB.
	MaxRecvBytes int
}

// ErrInvalidConfig is wrapped by Config.Validate; the message names the field.
var ErrInvalidConfig = errors.New("grpcdoor: invalid config")

// Validate reports the first invalid field, wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	switch {
	case c.Addr == "":
		return fmt.Errorf("%w: Addr is empty", ErrInvalidConfig)
	case len(c.Models) == 0 && c.Catalog == nil:
		return fmt.Errorf("%w: Models is empty and there is no Catalog", ErrInvalidConfig)
	}
	if err := c.ValidateTLS(ErrInvalidConfig); err != nil {
		return err
	}
	if err := c.Conns.Validate(ErrInvalidConfig, 0); err != nil {
		return err
	}
	for _, m := range c.Models {
		if m.Name == "" {
			return fmt.Errorf("%w: Models: a model has no name", ErrInvalidConfig)
		}
		if err := mesh.ValidateJob(m.Job); err != nil {
			return fmt.Errorf("%w: Models: %s: %w", ErrInvalidConfig, m.Name, err)
		}
	}
	return mesh.CheckLimits(ErrInvalidConfig, mesh.Limit{Name: "RequestTimeout", Value: c.RequestTimeout},
		mesh.Limit{Name: "MaxRecvBytes", Value: int64(c.MaxRecvBytes)}, mesh.Limit{Name: "ShutdownGrace", Value: c.ShutdownGrace},
		mesh.Limit{Name: "TokensPerSecond", Value: c.TokensPerSecond}, mesh.Limit{Name: "TokenAcquireTimeout", Value: c.TokenAcquireTimeout})
}

// Door is the gRPC door. Its RPCs are safe for concurrent use; Serve it
// once.
type Door struct {
	kservepb.UnimplementedGRPCInferenceServiceServer

	cfg    Config
	sub    Submitter
	log    *slog.Logger
	tls    *tls.Config       // nil: plaintext
	tokens *door.Tokens      // nil: no authentication
	bucket *door.TokenBucket // nil: no rate limit
	conns  *door.Listener    // set by Serve; nil: no cap
}

// New validates cfg and loads its TLS and token files; a file it cannot
// use is an *door.FileError naming its Config field.
func New(s Submitter, cfg Config) (*Door, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.MaxRecvBytes = cmp.Or(cfg.MaxRecvBytes, DefaultMaxRecvBytes)
	o, err := cfg.Open(ErrInvalidConfig, s)
	if err != nil {
		return nil, err
	}
	return &Door{cfg: cfg, sub: s, log: cfg.Logger, tls: o.TLS, tokens: o.Tokens, bucket: o.Bucket}, nil
}

// streamWorkers is how many goroutines a door's server keeps to run RPCs
// on: a new goroutine per RPC grew its stack to fit the door's and the
// mesh's calls on every request (runtime.copystack was 10% of a tiny
// model's CPU through this door), a pooled one keeps its grown stack. An
// RPC waits for its answer on its goroutine, so the pool is sized for
// many callers at once; past it, RPCs get goroutines of their own again.
const streamWorkers = 256

// Server returns a new *grpc.Server with the door's service (ModelInfer
// passing its bytes through, see passCodec), the standard health service
// (see health), server reflection, TLS, the message size limit, the
// token check (a tap handle, before any message is read), the
// connection bounds (handshake timeout, MaxConnectionIdle, the idle
// tracking Serve's listener sheds by) and the interceptors (span, panic
// recovery) registered. Serve uses it; tests may too.
func (d *Door) Server() *grpc.Server {
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(newPassCodec()),
		grpc.MaxRecvMsgSize(d.cfg.MaxRecvBytes),
		grpc.InTapHandle(d.authTap),
		grpc.ConnectionTimeout(door.HeaderTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: d.cfg.Conns.IdleTimeout}),
		grpc.StatsHandler(connStats{d}),
		grpc.ChainUnaryInterceptor(d.unaryInterceptors()...),
		grpc.ChainStreamInterceptor(d.recoverStream),
		grpc.NumStreamWorkers(streamWorkers),
	}
	if d.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(d.tls)))
	}
	gs := grpc.NewServer(opts...)
	gs.RegisterService(serviceDesc(), d)
	healthpb.RegisterHealthServer(gs, health{d: d})
	reflection.Register(gs)
	return gs
}

// Run listens on Config.Addr and serves until ctx ends (see Serve).
func (d *Door) Run(ctx context.Context) error {
	return door.Run(ctx, d.cfg.Addr, d.Serve)
}

// Serve serves on ln until ctx ends, then stops gracefully: no new RPCs,
// those in flight finish within ShutdownGrace, then the rest are cut. It
// closes ln and returns an error only when serving fails.
//
// It holds at most Conns.MaxConnections connections open: past that it
// closes the longest-idle one (no RPC in flight) to admit a new one, or
// the new one when none is idle (door.Listener).
func (d *Door) Serve(ctx context.Context, ln net.Listener) error {
	door.WarnIfOpen(d.log, "gRPC door", ln.Addr(), d.tokens == nil && d.cfg.TLSClientCAFile == "")
	d.conns = door.NewListener(ln, d.cfg.Conns.MaxConnections)
	ln = d.conns
	defer d.cfg.Metrics.OpenDoor(telemetry.DoorGRPC, ln.Addr().String())()
	return door.Serve(ctx, &stopper{Server: d.Server()}, ln, "gRPC door", d.cfg.ShutdownGrace, d.log, "models", len(d.models()),
		"tls", d.tls != nil, "clientCerts", d.cfg.TLSClientCAFile != "", "tokens", d.tokens != nil)
}

// stopper is a *grpc.Server as a door.Server; door.Serve calls its
// Shutdown and Close from one goroutine.
type stopper struct {
	*grpc.Server
	stopped chan struct{} // closed when Shutdown's GracefulStop returns
}

// Shutdown stops the server gracefully: no new RPCs, and it returns once
// those in flight end, or with ctx's error when ctx ends first.
func (s *stopper) Shutdown(ctx context.Context) error {
	s.stopped = make(chan struct{})
	go func() { s.GracefulStop(); close(s.stopped) }()
	select {
	case <-s.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close cuts the RPCs left and waits for Shutdown's GracefulStop, which
// then returns.
func (s *stopper) Close() error {
	s.Stop()
	if s.stopped != nil {
		<-s.stopped
	}
	return nil
}
