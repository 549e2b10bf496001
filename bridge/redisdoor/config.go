package redisdoor

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/cluster-serving/cluster-serving/telemetry"

	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// Defaults of Config.
const (
	DefaultJob           = mesh.DefaultJob
	DefaultTimeout       = 5 * time.Second
	DefaultDurable       = "redis-bridge"
	DefaultBatch         = 64
	DefaultBlock         = time.Second
	DefaultRescan        = 5 * time.Second
	DefaultRetryInterval = 500 * time.Millisecond
)

// Names on the Redis side (SPEC §2).
const (
	// Group is the consumer group the clients create and the door reads with.
	Group = "serving"
	// ResultKeyPrefix starts every result key: cluster-serving_<job>:<uri>.
	ResultKeyPrefix = "cluster-serving_"
	// ResultField is the hash field holding the result.
	ResultField = "value"
	// NaN is the value written for a failed record.
	NaN = "NaN"
	// DoorName is the door's part of the results subject: serving.<job>.results.redis.
	DoorName = "redis"
)

// Config configures a Door. The zero value is invalid only for lack of Addr;
// every other field has a default.
type Config struct {
	// Addr is the Redis server: host:port, or a redis:// or rediss:// URL,
	// redis://[user:password@]host:port[/db] (user is an ACL user; leave it
	// out for requirepass). rediss:// means TLS. Required. It holds a
	// secret: Config's LogValue redacts it.
	Addr string
	// Job is the job name: the request stream's name and the middle of the
	// result keys. Default serving_stream.
	Job string
	// Queue is the queue settings of a job's model (its priority levels
	// and queue policy), where an entry's priority and timeout fields
	// place it (redisdoor.EntrySchedule); nil: those fields are ignored.
	Queue func(job string) modelconfig.Queue
	// Timeout is the dial, read and write timeout of Redis commands, and
	// how long one entry's hand-over to the mesh is retried before it is
	// left pending for a later try. Default 5s (config redisTimeout).
	Timeout time.Duration
	// TLS, when set, makes the connection use TLS with it (roots, client
	// certificate); see TLSConfig and LoadTrustStore. Nil: plain TCP, or
	// TLS with the system roots for a rediss:// Addr.
	TLS *tls.Config
	// Consumer is the door's name in the consumer group; keep it stable
	// across restarts so the door finds its own pending entries. Default
	// <hostname>-<job>.
	Consumer string
	// Durable is the durable consumer of the results stream. Default redis-bridge.
	Durable string
	// Batch is how many entries one XREADGROUP reads and how many results
	// one pipeline writes at most. Default 64.
	Batch int
	// Block is how long one XREADGROUP waits for new entries. Default 1s.
	Block time.Duration
	// Rescan is how often the door looks for entries the group skipped (a
	// client created it with $ after they were added). Default 5s.
	Rescan time.Duration
	// RetryInterval is the wait before a failed enqueue or Redis command is
	// tried again (a full work queue, Redis down). Default 500ms.
	RetryInterval time.Duration
	// Metrics counts records at this door (outcome and time from XADD to
	// the result write); nil records none.
	Metrics *telemetry.Metrics
}

// Validate reports the first invalid field, wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	switch {
	case c.Addr == "":
		return fmt.Errorf("%w: Addr empty", ErrInvalidConfig)
	case c.Job != "" && mesh.ValidateJob(c.Job) != nil:
		return fmt.Errorf("%w: Job %q may hold only letters, digits, '_' and '-'", ErrInvalidConfig, c.Job)
	case c.Timeout < 0, c.Block < 0, c.Rescan < 0, c.RetryInterval < 0, c.Batch < 0:
		return fmt.Errorf("%w: negative Timeout, Block, Rescan, RetryInterval or Batch", ErrInvalidConfig)
	}
	if _, err := c.options(); err != nil {
		return err
	}
	return nil
}

func (c *Config) defaults() {
	c.Job = cmp.Or(c.Job, DefaultJob)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	if c.Consumer == "" {
		host, _ := os.Hostname()
		host = cmp.Or(host, "bridge")
		c.Consumer = host + "-" + c.Job
	}
	c.Durable = cmp.Or(c.Durable, DefaultDurable)
	c.Batch = cmp.Or(c.Batch, DefaultBatch)
	c.Block = cmp.Or(c.Block, DefaultBlock)
	c.Rescan = cmp.Or(c.Rescan, DefaultRescan)
	c.RetryInterval = cmp.Or(c.RetryInterval, DefaultRetryInterval)
}

// options turns Addr, Timeout and TLS into go-redis options. A rediss://
// URL turns TLS on by itself, with the system roots unless TLS is set;
// TLS set then keeps the URL's server name and skip_verify.
func (c Config) options() (*goredis.Options, error) {
	opt, err := parseAddr(c.Addr)
	if err != nil {
		return nil, err
	}
	if c.TLS != nil {
		tc := c.TLS.Clone()
		if u := opt.TLSConfig; u != nil {
			tc.ServerName = cmp.Or(tc.ServerName, u.ServerName)
			tc.InsecureSkipVerify = tc.InsecureSkipVerify || u.InsecureSkipVerify
		}
		opt.TLSConfig = tc
	}
	if c.Timeout > 0 {
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = c.Timeout, c.Timeout, c.Timeout
	}
	return opt, nil
}

// parseAddr reads host:port or a redis:// or rediss:// URL
// ([user:password@]host:port[/db]). Its errors never hold the password:
// url.Parse's quote the whole URL, so only their cause is kept.
func parseAddr(addr string) (*goredis.Options, error) {
	if !strings.Contains(addr, "://") {
		if strings.Contains(addr, "@") {
			return nil, fmt.Errorf("%w: Addr: a user or password needs a URL, redis://user:password@host:port", ErrInvalidConfig)
		}
		return &goredis.Options{Addr: addr}, nil
	}
	opt, err := goredis.ParseURL(addr)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		err = ue.Err
	}
	if err != nil {
		return nil, fmt.Errorf("%w: Addr: %w", ErrInvalidConfig, err)
	}
	return opt, nil
}

// LogValue shows the config with Addr's password redacted and TLS as on
// or off, so that logging a Config never prints a secret.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("addr", telemetry.RedactURL(c.Addr)), slog.String("job", c.Job), slog.Bool("tls", c.TLS != nil),
		slog.Duration("timeout", c.Timeout), slog.String("consumer", c.Consumer), slog.String("durable", c.Durable),
		slog.Int("batch", c.Batch), slog.Duration("block", c.Block), slog.Duration("rescan", c.Rescan),
		slog.Duration("retry_interval", c.RetryInterval))
}

// ResultKey is the key the result of uri is written to: cluster-serving_<job>:<uri>.
func ResultKey(job, uri string) string { return ResultKeyPrefix + job + ":" + uri }
