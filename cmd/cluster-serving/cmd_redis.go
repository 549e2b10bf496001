package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cluster-serving/cluster-serving/bridge/redis"
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
	if cfg.RedisURL == "" {
		return errors.New("bridge needs a Redis: set redisUrl in the config (host:port or redis://:password@host:port)")
	}
	return runDoorProcess(ctx, stop, "bridge", f, cfg, []string{cfg.JobName}, stderr, func(ctx context.Context, g *errgroup.Group, d doorDeps) error {
		if err := startRedisDoor(ctx, g, d); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "redis bridge of job %q: reads stream %q (group %q) at %s, queues on NATS %s, writes %s<uri>\n",
			cfg.JobName, cfg.JobName, redis.Group, redactURL(cfg.RedisURL), cfg.NatsURL, redis.ResultKey(cfg.JobName, ""))
		return nil
	})
}

// redactURL hides the password of a redis:// URL.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	return s
}
