package grpcdoor

import (
	"context"
	"runtime/debug"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

var tracer = otel.Tracer(telemetry.ScopeName + "/bridge/grpcdoor")

// mdCarrier reads and writes trace context in gRPC metadata.
type mdCarrier metadata.MD

func (c mdCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c mdCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}

// incomingCarrier reads trace context from a call's incoming metadata
// key by key: metadata.FromIncomingContext copies every key and value
// of the call (2% of a tiny model's CPU through this door), and Extract
// reads only its propagators' few keys.
type incomingCarrier struct{ ctx context.Context }

func (c incomingCarrier) Get(key string) string {
	if v := metadata.ValueFromIncomingContext(c.ctx, key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (incomingCarrier) Set(string, string) {} // Extract only reads

func (c incomingCarrier) Keys() []string {
	md, _ := metadata.FromIncomingContext(c.ctx)
	return mdCarrier(md).Keys()
}

// tracedUnary runs each RPC in a server span named after its method
// ("inference.GRPCInferenceService/ModelInfer"), the caller's child when
// its metadata carries a traceparent; the mesh continues it.
func (d *Door) tracedUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx = otel.GetTextMapPropagator().Extract(ctx, incomingCarrier{ctx})
	name := strings.TrimPrefix(info.FullMethod, "/")
	ctx, span := telemetry.Start(ctx, tracer, name, trace.SpanKindServer)
	defer span.End()
	if !span.IsRecording() { // sampled out: no attribute work
		return handler(ctx, req)
	}
	service, method, _ := strings.Cut(name, "/")
	span.SetAttributes(attribute.String("rpc.system", "grpc"), attribute.String("rpc.service", service), attribute.String("rpc.method", method))
	resp, err := handler(ctx, req)
	code := status.Code(err)
	span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(code)))
	if serverFault(code) {
		span.SetStatus(otelcodes.Error, code.String())
	}
	return resp, err
}

// serverFault reports whether code is the server's fault, as OTel's gRPC
// conventions mark server spans.
func serverFault(code codes.Code) bool {
	switch code {
	case codes.Unknown, codes.DeadlineExceeded, codes.Unimplemented, codes.Internal, codes.Unavailable, codes.DataLoss:
		return true
	}
	return false
}

// recoverUnary answers an RPC whose handling panicked with Internal,
// logging the panic once with its stack, so that one bad request cannot
// take the door down.
func (d *Door) recoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			d.log.ErrorContext(ctx, "gRPC door: handler panicked", "method", info.FullMethod, "panic", p, "stack", string(debug.Stack()))
			resp, err = nil, status.Errorf(codes.Internal, "internal error: %v", p)
		}
	}()
	return handler(ctx, req)
}

func (d *Door) recoverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			d.log.Error("gRPC door: stream handler panicked", "method", info.FullMethod, "panic", p, "stack", string(debug.Stack()))
			err = status.Errorf(codes.Internal, "internal error: %v", p)
		}
	}()
	return handler(srv, ss)
}

// kserveService is the OIP service's full name.
const kserveService = "inference.GRPCInferenceService"

// exempt reports whether method needs no token: the health probes, which
// load balancers and orchestrators call bare, as the HTTP door exempts
// /v2/health/*; and server reflection, which tells only the public OIP
// schema (as GET / tells the routes) and which grpcurl needs before any
// call, a bare ServerLive included.
func exempt(method string) bool {
	switch method {
	case "/" + kserveService + "/ServerLive", "/" + kserveService + "/ServerReady", "/grpc.health.v1.Health/Check":
		return true
	}
	return strings.HasPrefix(method, "/grpc.reflection.")
}

// authTap refuses a call without a valid bearer token (Config.TokenFile)
// with Unauthenticated, unless its method is exempt. As a tap handle it
// runs when the call's headers arrive, so a refused caller's message is
// never read (at most the HTTP/2 flow-control window of it reaches the
// socket buffers). It neither logs nor echoes the token.
func (d *Door) authTap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if d.tokens == nil || exempt(info.FullMethodName) {
		return ctx, nil
	}
	return ctx, d.authorize(info.Header, info.FullMethodName)
}

// authorize refuses a call with Unauthenticated when no authorization
// metadata in md holds a token of the file, with PermissionDenied when the
// best role among them is short of what method needs (see need).
func (d *Door) authorize(md metadata.MD, method string) error {
	if d.tokens == nil || exempt(method) {
		return nil
	}
	role := door.RoleNone
	for _, v := range md.Get("authorization") {
		scheme, token, _ := strings.Cut(v, " ")
		if strings.EqualFold(scheme, "Bearer") {
			role = max(role, d.tokens.Role(strings.TrimSpace(token)))
		}
	}
	switch {
	case role == door.RoleNone:
		return status.Error(codes.Unauthenticated, "missing or invalid bearer token: send the metadata 'authorization: Bearer TOKEN' with a token of httpAuthTokenFile")
	case role < need(method):
		return status.Errorf(codes.PermissionDenied, "%s needs a token of role admin (a line 'TOKEN admin' of httpAuthTokenFile); this one is an infer token", method)
	}
	return nil
}
