package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	httpdoor "github.com/cluster-serving/cluster-serving/bridge/http"
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
	hc := httpdoor.Config{
		Addr:           httpAddr(file),
		RequestTimeout: time.Duration(file.HTTPRequestTimeout) * time.Millisecond,
		MaxBodyBytes:   file.HTTPMaxBodyBytes,
		Version:        semver(version),
		ShutdownGrace:  file.Grace(),

		TLSCertFile:     file.HTTPTLSCert,
		TLSKeyFile:      file.HTTPTLSKey,
		TLSClientCAFile: file.HTTPTLSClientCA,
		TokenFile:       file.HTTPAuthTokenFile,
	}
	hc.TokensPerSecond, hc.TokenAcquireTimeout = file.TokenBucket()
	hc.Models = doorModels(models)
	return hc
}

// doorModels lists the node's models as the HTTP and gRPC doors take them.
func doorModels(models []serving.Model) []door.Model {
	out := make([]door.Model, len(models))
	for i, m := range models {
		out[i] = door.Model{Name: m.Name, Version: m.Version, Job: m.Job, Info: m.Info}
	}
	return out
}

// httpRunner builds the HTTP door on the node, nil when httpPort is -1. It
// listens before returning, so a port in use fails the command at once.
func httpRunner(d doorDeps) (func(context.Context) error, error) {
	if !httpOn(d.p.file) {
		return nil, nil
	}
	hc := httpConfig(d.p.file, d.node.Models())
	hc.Ready, hc.Logger, hc.Metrics = d.node.Ready, d.log, d.metrics
	if repo := d.node.Repository(); repo != nil {
		hc.Repository = doorRepository{repo}
	}
	door, err := httpdoor.New(d.node.Client(), hc)
	if err != nil {
		return nil, httpFileError(err)
	}
	ln, err := net.Listen("tcp", hc.Addr)
	if err != nil {
		return nil, httpListen(d.p.file).error(err)
	}
	return func(ctx context.Context) error { return door.Serve(ctx, ln) }, nil
}

// httpFileKeys names the config key of each file field of httpdoor.Config.
var httpFileKeys = map[string]string{
	"TLSCertFile":     "httpTlsCert",
	"TLSKeyFile":      "httpTlsKey",
	"TLSClientCAFile": "httpTlsClientCa",
	"TokenFile":       "httpAuthTokenFile",
}

// httpFileError names the config key of a file the door cannot use.
func httpFileError(err error) error {
	var fe *door.FileError
	if !errors.As(err, &fe) || httpFileKeys[fe.Field] == "" {
		return err
	}
	if strings.Contains(fe.Err.Error(), fe.Path) { // an *fs.PathError
		return fmt.Errorf("config key %q: %w", httpFileKeys[fe.Field], fe.Err)
	}
	return fmt.Errorf("config key %q: %s: %w", httpFileKeys[fe.Field], fe.Path, fe.Err)
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
		node: func(c *serving.Config) { c.Describe, c.Service = true, true },
		doors: func(d doorDeps) ([]func(context.Context) error, error) {
			door, err := httpRunner(d)
			if err != nil {
				return nil, err
			}
			grpcDoor, err := grpcRunner(d)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(stdout, "HTTP door on %s://%s for %d model(s), queues on NATS %s\n",
				httpScheme(file), httpAddr(file), len(d.node.Models()), telemetry.RedactURL(file.NatsURL))
			if grpcOn(file) {
				fmt.Fprintf(stdout, "gRPC door on %s\n", grpcAddr(file))
			}
			printOtherModels(stdout, file, d.node.Models())
			return nonNil(door, grpcDoor), nil
		}}
	return p.run(ctx)
}
