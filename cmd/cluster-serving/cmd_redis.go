package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cluster-serving/cluster-serving/bridge/redisdoor"
	"github.com/cluster-serving/cluster-serving/bridge/respdoor"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// redisRunner builds the Redis door on the node, nil when redisUrl is empty.
func redisRunner(d doorDeps) (func(context.Context) error, error) {
	if d.p.file.RedisURL == "" {
		return nil, nil
	}
	rc, err := redisdoor.FileConfig(d.p.file)
	if err != nil {
		return nil, err
	}
	rc.Metrics, rc.Queue = d.metrics, d.node.QueueOf
	door, err := redisdoor.New(rc, d.node.Client(), d.log)
	if err != nil {
		return nil, err
	}
	return door.Run, nil
}

// respListen is where the RESP door listens: respListen, likely held by
// a redis-server.
func respListen(file *serving.File) listenAddr {
	return listenAddr{"respListen", file.RESPListen, "redis-server"}
}

// respRunner builds the RESP door on the node, nil when respListen is
// empty; its file errors name their resp* config key.
func respRunner(d doorDeps) (func(context.Context) error, error) {
	return listenRunner(d.p.file.RESPListen != "", respListen(d.p.file), func() (*respdoor.Door, error) {
		rc := respdoor.FileConfig(d.p.file, d.node.Models())
		rc.Logger, rc.Metrics, rc.Version, rc.Queue = d.log, d.metrics, semver(version), d.node.QueueOf
		door, err := respdoor.New(d.node.Client(), rc)
		return door, respdoor.KeyError(err)
	})
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
		// The door serves the default model's job, jobName; a
		// repository's models are described (its ensembles' steps too).
		node: func(c *serving.Config) {
			c.Models, c.Service = c.Models[:min(1, len(c.Models))], true
			c.Describe = c.Repository.Dir != ""
		},
		doors: []doorBuilder{redisRunner},
		announce: func(doorDeps) {
			fmt.Fprintf(stdout, "redis bridge of job %q: reads stream %q (group %q) at %s, queues on NATS %s, writes %s<uri>\n",
				file.JobName, file.JobName, redisdoor.Group, telemetry.RedactURL(file.RedisURL), telemetry.RedactURL(file.NatsURL), redisdoor.ResultKey(file.JobName, ""))
		}}
	return p.run(ctx)
}
