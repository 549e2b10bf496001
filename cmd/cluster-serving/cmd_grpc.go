package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	grpcdoor "github.com/cluster-serving/cluster-serving/bridge/grpc"
	httpdoor "github.com/cluster-serving/cluster-serving/bridge/http"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// grpcOn reports whether the config runs a gRPC door: grpcPort 0 (the
// default) means none.
func grpcOn(file *serving.File) bool { return file.GRPCPort > 0 }

// grpcAddr is where the gRPC door listens: httpInterface:grpcPort.
func grpcAddr(file *serving.File) string {
	host, _, _ := net.SplitHostPort(httpdoor.DefaultAddr)
	if file.HTTPInterface != "" {
		host = file.HTTPInterface
	}
	return net.JoinHostPort(host, strconv.Itoa(file.GRPCPort))
}

func grpcListen(file *serving.File) listenAddr {
	return listenAddr{"grpcPort", grpcAddr(file), "gRPC server"}
}

// grpcConfig maps config.yaml's keys (the HTTP door's security, timeout,
// size and token bucket keys, which the gRPC door shares) and the node's models to the
// door's Config.
func grpcConfig(file *serving.File, models []serving.Model) grpcdoor.Config {
	gc := grpcdoor.Config{
		Addr:           grpcAddr(file),
		RequestTimeout: time.Duration(file.HTTPRequestTimeout) * time.Millisecond,
		MaxRecvBytes:   int(min(file.HTTPMaxBodyBytes, 1<<31-1)),
		Version:        semver(version),
		ShutdownGrace:  file.Grace(),

		TLSCertFile:     file.HTTPTLSCert,
		TLSKeyFile:      file.HTTPTLSKey,
		TLSClientCAFile: file.HTTPTLSClientCA,
		TokenFile:       file.HTTPAuthTokenFile,
	}
	gc.TokensPerSecond, gc.TokenAcquireTimeout = file.TokenBucket()
	gc.Models = doorModels(models)
	return gc
}

// grpcRunner builds the gRPC door on the node, nil when grpcPort is 0. It
// listens before returning, so a port in use fails the command at once.
func grpcRunner(d doorDeps) (func(context.Context) error, error) {
	if !grpcOn(d.p.file) {
		return nil, nil
	}
	gc := grpcConfig(d.p.file, d.node.Models())
	gc.Ready, gc.Logger, gc.Metrics = d.node.Ready, d.log, d.metrics
	if repo := d.node.Repository(); repo != nil {
		// The models the repository loads or unloads after start, as the
		// HTTP door sees them.
		gc.Catalog = doorRepository{repo}
	}
	door, err := grpcdoor.New(d.node.Client(), gc)
	if err != nil {
		return nil, httpFileError(err)
	}
	ln, err := net.Listen("tcp", gc.Addr)
	if err != nil {
		return nil, grpcListen(d.p.file).error(err)
	}
	return func(ctx context.Context) error { return door.Serve(ctx, ln) }, nil
}

// grpcurlLine is the banner's line for the gRPC door: a grpcurl command
// listing its services, with the flags its TLS and token need (the token
// as a shell variable, as for curl).
func grpcurlLine(file *serving.File) string {
	words := []string{"grpcurl"}
	if file.HTTPTLSCert == "" {
		words = append(words, "-plaintext")
	} else {
		words = append(words, "-cacert", shellJoin(absPath(file.HTTPTLSCert)))
	}
	if file.HTTPTLSClientCA != "" {
		words = append(words, `-cert "$CLIENT_CERT" -key "$CLIENT_KEY"`)
	}
	if file.HTTPAuthTokenFile != "" {
		words = append(words, `-H "authorization: Bearer $TOKEN"`)
	}
	words = append(words, dialable(grpcAddr(file)), "list")
	return fmt.Sprintf("  %s   # the gRPC door (OIP/KServe v2 inference.GRPCInferenceService)\n", strings.Join(words, " "))
}
