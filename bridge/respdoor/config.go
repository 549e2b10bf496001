package respdoor

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// Defaults of Config.
const (
	DefaultUser            = "default"
	DefaultTimeout         = 5 * time.Second
	DefaultIdleTimeout     = 5 * time.Minute
	DefaultWriteTimeout    = 30 * time.Second
	DefaultMaxCommandBytes = 16<<20 + 64<<10
	DefaultDurable         = "resp-door"
	DefaultBatch           = 64
	// DoorName is the door's part of the results subject:
	// serving.<job>.results.resp.
	DoorName = telemetry.DoorRESP
)

// Config configures a Door. The zero value is invalid only for lack of
// Addr and Jobs; every other field has a default.
type Config struct {
	// Addr is the host:port to listen on (config key respListen).
	Addr string
	// Jobs are the jobs served: each is a stream name for XADD and the
	// middle of its result keys. Required.
	Jobs []string
	// Queue is the queue settings of a job's model (its priority levels
	// and queue policy), where an entry's priority and timeout fields
	// place it (redisdoor.EntrySchedule); nil: those fields are ignored.
	Queue func(job string) modelconfig.Queue
	// User and PasswordFile, when PasswordFile is set, make every command
	// but AUTH, HELLO … AUTH and QUIT need AUTH [user] password first
	// (config keys respUser, default "default", and respPasswordFile: a
	// file holding the password, its trailing newline dropped). Default:
	// no authentication.
	User, PasswordFile string
	// TLSCertFile, TLSKeyFile and TLSClientCAFile: see door.Config (config
	// keys respTlsCert, respTlsKey, respTlsClientCa).
	TLSCertFile, TLSKeyFile, TLSClientCAFile string
	// Streams gives the replicas and storage of the result buckets: the
	// job's streams' (serving.File.Stream).
	Streams mesh.StreamConfig
	// ResultTTL is how long a result nobody deleted is kept (config key
	// respResultTTL). Default mesh.DefaultBucketTTL (1h).
	ResultTTL time.Duration
	// Timeout bounds storing one XADD's record in JetStream; past it the
	// XADD is answered -BUSY. Default 5s.
	Timeout time.Duration
	// IdleTimeout closes a connection that sent nothing for this long
	// (config key respIdleTimeout). Default 5m.
	IdleTimeout time.Duration
	// WriteTimeout bounds writing one answer to a client that does not
	// read. Default 30s.
	WriteTimeout time.Duration
	// MaxConnections caps the connections open at once (see
	// door.Listener; config key respMaxConnections). Default
	// door.MaxConnections().
	MaxConnections int
	// MaxCommandBytes bounds one command as it comes over the wire; a
	// longer one gets an error and its connection is closed. Default
	// 16 MiB + 64 KiB.
	MaxCommandBytes int
	// NotifyKeyspaceEvents are the keyspace notifications the door
	// starts with, in CONFIG SET notify-keyspace-events' letters
	// (config key respNotifyKeyspaceEvents; notify.go). Default "":
	// none, as Redis.
	NotifyKeyspaceEvents string
	// ShutdownGrace bounds how long XADDs in flight may finish when ctx
	// ends. Default door.DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// Durable is the durable consumer of the results; Batch how many
	// results one put takes at most. Defaults resp-door and 64.
	Durable string
	Batch   int
	// Version is the server version HELLO and INFO report beside the
	// Redis version the door speaks. Default door.DefaultVersion.
	Version string
	// Logger logs listen, shutdown and internal errors. Default
	// slog.Default().
	Logger *slog.Logger
	// Metrics counts records at the door; nil records none.
	Metrics *telemetry.Metrics
}

// Validate reports the first invalid field, wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	switch {
	case c.Addr == "":
		return fmt.Errorf("%w: Addr empty", ErrInvalidConfig)
	case len(c.Jobs) == 0:
		return fmt.Errorf("%w: Jobs empty", ErrInvalidConfig)
	case c.User != "" && c.PasswordFile == "":
		return fmt.Errorf("%w: User needs PasswordFile", ErrInvalidConfig)
	}
	for _, j := range c.Jobs {
		if err := mesh.ValidateJob(j); err != nil {
			return fmt.Errorf("%w: Jobs: %w", ErrInvalidConfig, err)
		}
	}
	if _, ok := parseNotify(c.NotifyKeyspaceEvents); !ok {
		return fmt.Errorf("%w: NotifyKeyspaceEvents %q: a class Redis does not know: use the letters of 'Ag$lshzxeKEtmdn'", ErrInvalidConfig, c.NotifyKeyspaceEvents)
	}
	if err := (door.Config{TLSCertFile: c.TLSCertFile, TLSKeyFile: c.TLSKeyFile, TLSClientCAFile: c.TLSClientCAFile}).ValidateTLS(ErrInvalidConfig); err != nil {
		return err
	}
	return mesh.CheckLimits(ErrInvalidConfig, mesh.Limit{Name: "ResultTTL", Value: c.ResultTTL}, mesh.Limit{Name: "Timeout", Value: c.Timeout},
		mesh.Limit{Name: "IdleTimeout", Value: c.IdleTimeout}, mesh.Limit{Name: "WriteTimeout", Value: c.WriteTimeout},
		mesh.Limit{Name: "MaxConnections", Value: int64(c.MaxConnections)}, mesh.Limit{Name: "MaxCommandBytes", Value: int64(c.MaxCommandBytes)},
		mesh.Limit{Name: "ShutdownGrace", Value: c.ShutdownGrace}, mesh.Limit{Name: "Batch", Value: int64(c.Batch)})
}

func (c *Config) defaults() {
	c.Jobs = slices.Compact(slices.Clone(c.Jobs))
	c.User = cmp.Or(c.User, DefaultUser)
	c.ResultTTL = cmp.Or(c.ResultTTL, mesh.DefaultBucketTTL)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, DefaultIdleTimeout)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, DefaultWriteTimeout)
	c.MaxConnections = cmp.Or(c.MaxConnections, door.MaxConnections())
	c.MaxCommandBytes = cmp.Or(c.MaxCommandBytes, DefaultMaxCommandBytes)
	c.ShutdownGrace = cmp.Or(c.ShutdownGrace, door.DefaultShutdownGrace)
	c.Durable = cmp.Or(c.Durable, DefaultDurable)
	c.Batch = cmp.Or(c.Batch, DefaultBatch)
	c.Version = cmp.Or(c.Version, door.DefaultVersion)
	c.Logger = cmp.Or(c.Logger, slog.Default())
}

// LogValue shows the config without secrets: the password file's path,
// never its contents.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(slog.String("addr", c.Addr), slog.Any("jobs", c.Jobs), slog.Bool("auth", c.PasswordFile != ""),
		slog.Bool("tls", c.TLSCertFile != ""), slog.Duration("result_ttl", c.ResultTTL), slog.Duration("idle_timeout", c.IdleTimeout),
		slog.Int("max_connections", c.MaxConnections))
}
