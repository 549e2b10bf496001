package door

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

// Config is what the HTTP and gRPC doors' Configs share, embedded in
// both: cmd fills it once from the HTTP keys and hands it to both doors.
// Each door's Config says how it applies a field where they differ.
type Config struct {
	// Addr is the host:port to listen on.
	Addr string
	// Models lists the served models (each Version default "1").
	Models []Model
	// RequestTimeout bounds each inference request; past it the door
	// answers a timeout and the work, carrying the deadline, is dropped
	// unrun by the worker. Default 30s.
	RequestTimeout time.Duration
	// TokensPerSecond, when > 0, puts a TokenBucket (burst
	// max(1, TokensPerSecond)) in front of inference (config keys
	// tokensPerSecond and tokenAcquireTimeout): a request that gets no
	// token within TokenAcquireTimeout is refused.
	TokensPerSecond     float64
	TokenAcquireTimeout time.Duration
	// Ready reports whether every model is loaded and warmed; nil means
	// always. The readiness probes answer not ready until it is true.
	Ready func() bool
	// Version is the server version the door reports. Default "0.0.0".
	Version string
	// ShutdownGrace bounds how long the door waits for requests in
	// flight after its ctx ends. Default 30s.
	ShutdownGrace time.Duration
	// Logger logs listen, shutdown and internal errors. Default
	// slog.Default().
	Logger *slog.Logger
	// Metrics counts inference requests at the door; nil records none.
	Metrics *telemetry.Metrics

	// TLSCertFile and TLSKeyFile, PEM files, make the door speak TLS only
	// (TLS 1.2 at least; see ServerTLS); set both or neither. Default:
	// plaintext. TLSClientCAFile, a PEM file of CA certificates, makes the
	// door require a client certificate chaining to one of them, refusing
	// a client without one at the handshake. Needs TLSCertFile.
	TLSCertFile, TLSKeyFile, TLSClientCAFile string
	// TokenFile holds the bearer tokens, one a line (blank lines and #
	// comments skipped), re-read when it changes (see Tokens). Default:
	// no authentication.
	TokenFile string

	// Conns bounds the door's connections (see Conns). The zero value
	// means its defaults.
	Conns Conns

	// SharedMemory is the registry of system shared memory regions the
	// door serves (see SharedMemory). Default DefaultSharedMemory, which
	// every door of the process shares, as Triton's endpoints do.
	SharedMemory *SharedMemory

	// Cache is the mesh's response cache (a *mesh.Cache), where the door
	// looks up the answers of the models that enable it (see Submit);
	// nil: none, every request goes to the workers.
	Cache Cache
}

// SetDefaults sets c's zero fields to their defaults, in place: the
// request timeout, the shutdown grace, the version, the logger, each
// model's version (on a copy of the list), the connection bounds
// (whose WriteTimeout follows from TokenAcquireTimeout and the request
// timeout) and the shared memory registry. One place, so that the
// doors cannot drift apart.
func (c *Config) SetDefaults() {
	c.RequestTimeout = cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	c.ShutdownGrace = cmp.Or(c.ShutdownGrace, DefaultShutdownGrace)
	c.Version = cmp.Or(c.Version, DefaultVersion)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Models = Versioned(c.Models)
	c.Conns = c.Conns.WithDefaults(c.RequestTimeout, c.TokenAcquireTimeout)
	c.SharedMemory = cmp.Or(c.SharedMemory, DefaultSharedMemory)
}

// ValidateTLS reports, wrapping invalid, a certificate without its key
// (or the reverse) and a client CA without a certificate.
func (c Config) ValidateTLS(invalid error) error {
	switch {
	case (c.TLSCertFile == "") != (c.TLSKeyFile == ""):
		return fmt.Errorf("%w: TLSCertFile and TLSKeyFile go together: set both or neither", invalid)
	case c.TLSClientCAFile != "" && c.TLSCertFile == "":
		return fmt.Errorf("%w: TLSClientCAFile needs TLSCertFile and TLSKeyFile: client certificates are asked for only over TLS", invalid)
	}
	return nil
}

// Load loads the door's TLS files (see ServerTLS) and its token file
// (see NewTokens, logging to Logger; none when TokenFile is empty).
// Errors are *FileError.
func (c Config) Load() (*tls.Config, *Tokens, error) {
	tc, err := ServerTLS(c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile)
	if err != nil || c.TokenFile == "" {
		return tc, nil, err
	}
	tokens, err := NewTokens(c.TokenFile, c.Logger)
	if err != nil {
		return nil, nil, err
	}
	return tc, tokens, nil
}

// Opened is what a door opens its Config to: its TLS config (nil:
// plaintext), its tokens (nil: no authentication) and its token bucket
// (nil: no rate limit).
type Opened struct {
	TLS    *tls.Config
	Tokens *Tokens
	Bucket *TokenBucket
}

// Open is what both doors' New do once their Config is valid: it refuses
// a nil s (wrapping invalid), sets c's defaults (SetDefaults), loads its
// files (Load; errors are *FileError) and makes its token bucket.
func (c *Config) Open(invalid error, s Submitter) (Opened, error) {
	if s == nil {
		return Opened{}, fmt.Errorf("%w: Submitter is nil", invalid)
	}
	c.SetDefaults()
	tc, tokens, err := c.Load()
	if err != nil {
		return Opened{}, err
	}
	return Opened{TLS: tc, Tokens: tokens, Bucket: NewTokenBucket(c.TokensPerSecond, c.TokenAcquireTimeout)}, nil
}
