package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	grpcdoor "github.com/cluster-serving/cluster-serving/bridge/grpcdoor"
	httpdoor "github.com/cluster-serving/cluster-serving/bridge/httpdoor"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// grpcOn reports whether the config runs a gRPC door: grpcPort 0 (the
// default) means none.
func grpcOn(file *serving.File) bool { return file.GRPCPort > 0 }

// grpcAddr is where the gRPC door listens: httpInterface:grpcPort.
func grpcAddr(file *serving.File) string {
	host, _, _ := net.SplitHostPort(httpAddr(file))
	return net.JoinHostPort(host, strconv.Itoa(file.GRPCPort))
}

func grpcListen(file *serving.File) listenAddr {
	return listenAddr{"grpcPort", grpcAddr(file), "gRPC server"}
}

// grpcConfig maps config.yaml's keys and the node's models to the
// door's Config: the gRPC door takes the HTTP door's (hc's) security,
// timeout, size, connection and token bucket keys, its models, and its
// repository as the catalog (the models loaded or unloaded after start,
// as the HTTP door sees them).
func grpcConfig(file *serving.File, hc httpdoor.Config) grpcdoor.Config {
	gc := grpcdoor.Config{Config: hc.Config, Catalog: hc.Repository, MaxRecvBytes: int(min(hc.MaxBodyBytes, 1<<31-1))}
	gc.Addr = grpcAddr(file)
	return gc
}

// grpcRunner builds the gRPC door on the node, nil when grpcPort is 0.
func grpcRunner(d doorDeps) (func(context.Context) error, error) {
	return listenRunner(grpcOn(d.p.file), grpcListen(d.p.file), func() (*grpcdoor.Door, error) {
		return grpcdoor.New(d.node.Client(), grpcConfig(d.p.file, nodeHTTPConfig(d)))
	})
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
