package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cluster-serving/cluster-serving/bridge/redisdoor"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// redisConfig maps config.yaml's redis keys to the door's Config; a zero
// timeout is the door's default. Its errors name the config key and never
// hold a password.
func redisConfig(file *serving.File) (redisdoor.Config, error) {
	rc := redisdoor.Config{
		Addr:    file.RedisURL,
		Job:     file.JobName,
		Timeout: time.Duration(file.RedisTimeout) * time.Millisecond,
	}
	tc, err := redisTLS(file)
	if err != nil {
		return rc, err
	}
	rc.TLS = tc
	if err := rc.Validate(); err != nil {
		return rc, fmt.Errorf("config key \"redisUrl\": %w", err)
	}
	return rc, nil
}

// redisTLS builds the Redis door's TLS from redisSecureTrustStorePath (a
// PEM CA or a PKCS#12 trust store opened with
// redisSecureTrustStorePassword) and redisTlsCert/redisTlsKey (a client
// certificate for mutual TLS). TLS is on with redisSecureEnabled or a
// rediss:// redisUrl; nil when it is off.
func redisTLS(file *serving.File) (*tls.Config, error) {
	rediss := strings.HasPrefix(strings.ToLower(file.RedisURL), "rediss://")
	if !file.RedisSecureEnabled && !rediss {
		if file.RedisTLSCert != "" {
			return nil, errors.New("config key \"redisTlsCert\": a client certificate needs TLS: set redisSecureEnabled: true or use a rediss:// redisUrl")
		}
		return nil, nil
	}
	var roots *x509.CertPool
	if path := file.RedisSecureTrustStorePath; path != "" {
		var err error
		roots, err = redisdoor.LoadTrustStore(path, file.RedisSecureTrustStorePassword)
		switch {
		case errors.Is(err, redisdoor.ErrTrustStorePassword):
			return nil, fmt.Errorf("config key \"redisSecureTrustStorePassword\": %w", err)
		case err != nil:
			return nil, fmt.Errorf("config key \"redisSecureTrustStorePath\": %w", err)
		}
	}
	tc, err := redisdoor.TLSConfig(roots, file.RedisTLSCert, file.RedisTLSKey)
	if err != nil {
		return nil, fmt.Errorf("config keys \"redisTlsCert\", \"redisTlsKey\": %w", err)
	}
	return tc, nil
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
	door, err := redisdoor.New(rc, d.node.Client(), d.log)
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
		return errors.New("bridge needs a Redis: set redisUrl in the config (host:port, redis://[user:password@]host:port[/db] or rediss://host:port)")
	}
	if err := requireNATS("bridge", file); err != nil {
		return err
	}
	p := &process{role: "bridge", flags: f, file: file, stdout: stdout, stderr: stderr,
		// The door serves the default model's job, jobName.
		node:  func(c *serving.Config) { c.Models, c.Service = c.Models[:1], true },
		doors: []doorBuilder{redisRunner},
		announce: func(doorDeps) {
			fmt.Fprintf(stdout, "redis bridge of job %q: reads stream %q (group %q) at %s, queues on NATS %s, writes %s<uri>\n",
				file.JobName, file.JobName, redisdoor.Group, telemetry.RedactURL(file.RedisURL), telemetry.RedactURL(file.NatsURL), redisdoor.ResultKey(file.JobName, ""))
		}}
	return p.run(ctx)
}
