package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/cluster-serving/cluster-serving/bridge/redis"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// redisConfig maps config.yaml's redis keys to the door's Config; a zero
// timeout is the door's default.
func redisConfig(file *serving.File) (redis.Config, error) {
	rc := redis.Config{
		Addr:    file.RedisURL,
		Job:     file.JobName,
		Timeout: time.Duration(file.RedisTimeout) * time.Millisecond,
	}
	if file.RedisSecureEnabled {
		tc, err := redis.TLSConfig(file.RedisSecureTrustStorePath)
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

// redisRunner builds the Redis door on the node, nil when redisUrl is empty.
func redisRunner(d doorDeps) (func(context.Context) error, error) {
	if d.p.file.RedisURL == "" {
		return nil, nil
	}
	rc, err := redisConfig(d.p.file)
	if err != nil {
		return nil, err
	}
	rc.Metrics = d.metrics
	if d.p.file.RedisSecureTrustStorePassword != "" {
		d.log.Warn("redisSecureTrustStorePassword is not used: the trust store is a PEM file; put a Redis password in redisUrl (redis://:password@host:port)")
	}
	door, err := redis.New(rc, d.node.Client(), d.log)
	if err != nil {
		return nil, err
	}
	return door.Run, nil
}

// cmdBridge runs the Redis door alone against an external NATS: it reads
// the job's Redis stream, queues the records on NATS for the workers and
// writes their results back to Redis.
func cmdBridge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, file, err := parseServeFlags("bridge", args, stderr)
	if err != nil {
		return err
	}
	if file.RedisURL == "" {
		return errors.New("bridge needs a Redis: set redisUrl in the config (host:port or redis://:password@host:port)")
	}
	if err := requireNATS("bridge", file); err != nil {
		return err
	}
	p := &process{role: "bridge", flags: f, file: file, stdout: stdout, stderr: stderr,
		// The door serves the default model's job, jobName.
		node: func(c *serving.Config) { c.Models, c.Service = c.Models[:1], true },
		doors: func(d doorDeps) ([]func(context.Context) error, error) {
			door, err := redisRunner(d)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(stdout, "redis bridge of job %q: reads stream %q (group %q) at %s, queues on NATS %s, writes %s<uri>\n",
				file.JobName, file.JobName, redis.Group, redactURL(file.RedisURL), serving.RedactURL(file.NatsURL), redis.ResultKey(file.JobName, ""))
			return nonNil(door), nil
		}}
	return p.run(ctx)
}

// redactURL hides the password of a redis:// URL.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	return s
}
