package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	httpdoor "github.com/cluster-serving/cluster-serving/bridge/httpdoor"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// httpOn reports whether the config runs an HTTP door: httpPort -1 turns
// it off.
func httpOn(file *serving.File) bool { return file.HTTPPort >= 0 }

// httpAddr is where the HTTP door listens: httpInterface:httpPort, each
// defaulting to the door's own default address.
func httpAddr(file *serving.File) string {
	host, port, _ := net.SplitHostPort(httpdoor.DefaultAddr)
	if file.HTTPInterface != "" {
		host = file.HTTPInterface
	}
	if file.HTTPPort > 0 {
		port = strconv.Itoa(file.HTTPPort)
	}
	return net.JoinHostPort(host, port)
}

// httpConfig maps config.yaml's HTTP keys and the node's models to the
// door's Config; zero durations and sizes are the door's defaults.
func httpConfig(file *serving.File, models []serving.Model) httpdoor.Config {
	hc := httpdoor.Config{MaxBodyBytes: file.HTTPMaxBodyBytes, Config: door.Config{
		Addr:           httpAddr(file),
		RequestTimeout: time.Duration(file.HTTPRequestTimeout) * time.Millisecond,
		Version:        semver(version),
		ShutdownGrace:  file.Grace(),

		TLSCertFile:     file.HTTPTLSCert,
		TLSKeyFile:      file.HTTPTLSKey,
		TLSClientCAFile: file.HTTPTLSClientCA,
		TokenFile:       file.HTTPAuthTokenFile,
		Conns: door.Conns{
			IdleTimeout:    time.Duration(file.HTTPIdleTimeout) * time.Millisecond,
			ReadTimeout:    time.Duration(file.HTTPReadTimeout) * time.Millisecond,
			WriteTimeout:   time.Duration(file.HTTPWriteTimeout) * time.Millisecond,
			MaxConnections: file.HTTPMaxConnections,
		},
	}}
	hc.TokensPerSecond, hc.TokenAcquireTimeout = file.TokenBucket()
	hc.Models = doorModels(models)
	return hc
}

// nodeHTTPConfig is httpConfig with the node's models, readiness and
// repository, and the process's logger and metrics: what both the HTTP
// and the gRPC door run with.
func nodeHTTPConfig(d doorDeps) httpdoor.Config {
	hc := httpConfig(d.p.file, d.node.Models())
	hc.Ready, hc.Logger, hc.Metrics, hc.Status = d.node.Ready, d.log, d.metrics, d.node.Status
	hc.Cache = d.node.ResponseCache(d.p.file.CacheConfig())
	if repo := d.node.Repository(); repo != nil {
		hc.Repository = doorRepository{repo}
	}
	return hc
}

// doorModels lists the node's models as the HTTP and gRPC doors take them.
func doorModels(models []serving.Model) []door.Model {
	out := make([]door.Model, len(models))
	for i, m := range models {
		out[i] = door.Model{Name: m.Name, Version: m.Version, Job: m.Job, Info: m.Info, Config: m.ServedConfig()}
	}
	return out
}

// httpRunner builds the HTTP door on the node, nil when httpPort is -1.
func httpRunner(d doorDeps) (func(context.Context) error, error) {
	return listenRunner(httpOn(d.p.file), httpListen(d.p.file), func() (*httpdoor.Server, error) {
		return httpdoor.New(d.node.Client(), nodeHTTPConfig(d))
	})
}

// listenRunner builds a door that serves on a listener (the HTTP and
// gRPC doors), nil when it is off; its file errors name their config key.
// It listens on l before returning, so that a port in use fails the
// command at once.
func listenRunner[S interface {
	Serve(context.Context, net.Listener) error
}](on bool, l listenAddr, build func() (S, error)) (func(context.Context) error, error) {
	if !on {
		return nil, nil
	}
	s, err := build()
	if err != nil {
		return nil, door.KeyError(err)
	}
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		return nil, l.error(err)
	}
	return func(ctx context.Context) error { return s.Serve(ctx, ln) }, nil
}

// runners builds the doors with each of build and drops those that are
// off.
func runners(d doorDeps, build ...doorBuilder) ([]func(context.Context) error, error) {
	var out []func(context.Context) error
	for _, b := range build {
		r, err := b(d)
		if err != nil {
			return nil, err
		}
		if r != nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// httpScheme is https when the door serves TLS.
func httpScheme(file *serving.File) string {
	if file.HTTPTLSCert != "" {
		return "https"
	}
	return "http"
}

// cmdHTTP runs the HTTP door alone (with the gRPC door when grpcPort is
// set) against an external NATS. Its node
// reads each model's inputs and outputs (for metadata and examples) by
// opening an ONNX Runtime session and closing it again; workers elsewhere
// run the models.
func cmdHTTP(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, file, err := parseServeFlags("http", args, stderr)
	if err != nil {
		return err
	}
	if !httpOn(file) {
		return errors.New("config key \"httpPort\": -1 disables the HTTP door; set a port to run `http`")
	}
	if err := requireNATS("http", file); err != nil {
		return err
	}
	p := &process{role: "http", flags: f, file: file, stdout: stdout, stderr: stderr,
		node:  func(c *serving.Config) { c.Describe, c.Service = true, true },
		doors: []doorBuilder{httpRunner, grpcRunner, respRunner},
		announce: func(d doorDeps) {
			fmt.Fprintf(stdout, "HTTP door on %s://%s for %d model(s), queues on NATS %s\n",
				httpScheme(file), httpAddr(file), len(d.node.Models()), telemetry.RedactURL(file.NatsURL))
			if grpcOn(file) {
				fmt.Fprintf(stdout, "gRPC door on %s\n", grpcAddr(file))
			}
			printOtherModels(stdout, file, d.node.Models())
		}}
	return p.run(ctx)
}
