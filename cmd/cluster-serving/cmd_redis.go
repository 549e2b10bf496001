package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/cluster-serving/cluster-serving/bridge/redis"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// redisConfig maps config.yaml's redis keys to the door's Config.
func redisConfig(cfg *Config) (redis.Config, error) {
	rc := redis.Config{
		Addr:    cfg.RedisURL,
		Job:     cfg.JobName,
		Timeout: time.Duration(cfg.RedisTimeout) * time.Millisecond,
	}
	if cfg.RedisSecureEnabled {
		tc, err := redis.TLSConfig(cfg.RedisSecureTrustStorePath)
		if err != nil {
			return rc, fmt.Errorf("config key \"redisSecureTrustStorePath\": %w", err)
		}
		rc.TLS = tc
	}
	if err := rc.Validate(); err != nil {
		return rc, fmt.Errorf("config key \"redisUrl\": %w", err)
	}
	return rc, nil
}

// newRedisDoor builds the door of cfg on m.
func newRedisDoor(cfg *Config, m redis.Mesh, log *slog.Logger, metrics *telemetry.Metrics) (*redis.Door, error) {
	rc, err := redisConfig(cfg)
	if err != nil {
		return nil, err
	}
	rc.Metrics = metrics
	if cfg.RedisSecureTrustStorePassword != "" {
		log.Warn("redisSecureTrustStorePassword is not used: the trust store is a PEM file; put a Redis password in redisUrl (redis://:password@host:port)")
	}
	return redis.New(rc, m, log)
}

// startRedisDoor runs the Redis door in g when redisUrl is set.
func startRedisDoor(ctx context.Context, g *errgroup.Group, d doorDeps) error {
	if d.cfg.RedisURL == "" {
		return nil
	}
	door, err := newRedisDoor(d.cfg, d.client, d.log, d.metrics)
	if err != nil {
		return err
	}
	g.Go(func() error { return door.Run(ctx) })
	return nil
}

// cmdBridge runs the Redis door alone against an external NATS: it reads
// the job's Redis stream, queues the records on NATS for the workers and
// writes their results back to Redis.
func cmdBridge(ctx context.Context, stop <-chan stopKind, args []string, stdout, stderr io.Writer) error {
	f, cfg, err := parseServeFlags("bridge", args, stderr)
	if err != nil {
		return err
	}
	if cfg.NatsURL == "" {
		return errors.New("bridge joins an existing NATS: set natsUrl in the config or pass -nats nats://host:4222")
	}
	if cfg.RedisURL == "" {
		return errors.New("bridge needs a Redis: set redisUrl in the config (host:port or redis://:password@host:port)")
	}
	log := newLogger(cfg, stderr)
	log.Debug("effective config", "config", cfg)
	removePID, err := writePID(cfg.JobName, "bridge", f.args())
	if err != nil {
		return err
	}
	defer removePID()
	tel, metrics, err := setupTelemetry(ctx, cfg)
	if err != nil {
		return err
	}
	defer shutdownTelemetry(tel, log)

	nc, err := connect(cfg.NatsURL, cfg, nil, "bridge")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	// The streams exist whichever process comes up first.
	if err := mesh.EnsureStreams(ctx, js, streamConfig(cfg)); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	client, err := mesh.NewClient(nc, mesh.ClientConfig{})
	if err != nil {
		return err
	}
	defer client.Close()
	door, err := newRedisDoor(cfg, client, log, metrics)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "redis bridge of job %q: reads stream %q (group %q) at %s, queues on NATS %s, writes %s<uri>\n",
		cfg.JobName, cfg.JobName, redis.Group, redactURL(cfg.RedisURL), cfg.NatsURL, redis.ResultKey(cfg.JobName, ""))

	g, gctx := errgroup.WithContext(ctx)
	serveMetrics(gctx, g, cfg, tel, log)
	g.Go(func() error { return door.Run(gctx) })
	g.Go(func() error {
		select {
		case <-stop:
			log.Info("stopping: finishing in-flight enqueues and result writes; unread entries stay in Redis")
		case <-gctx.Done():
		}
		return nil
	})
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	if derr := nc.Drain(); derr != nil && !errors.Is(derr, nats.ErrConnectionClosed) {
		log.Warn("nats drain", "err", derr)
	}
	log.Info("stopped")
	return err
}

// redactURL hides the password of a redis:// URL.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	return s
}
