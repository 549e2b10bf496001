package grpcdoor_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	grpcdoor "github.com/cluster-serving/cluster-serving/bridge/grpcdoor"
	"github.com/cluster-serving/cluster-serving/embedded/tlstest"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// listServices asks the door's server reflection for its services, as
// `grpcurl list` does.
func listServices(ctx context.Context, c rpb.ServerReflectionClient) ([]string, error) {
	stream, err := c.ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}); err != nil {
		return nil, err
	}
	resp, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	_ = stream.CloseSend()
	var out []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		out = append(out, s.Name)
	}
	return out, nil
}

func TestReflection(t *testing.T) {
	addr := startDoor(t, grpcdoor.Config{}, served{name: "add", file: "add_f32"})
	got, err := listServices(callCtx(t), rpb.NewServerReflectionClient(dial(t, addr, nil)))
	if err != nil || !slices.Contains(got, "inference.GRPCInferenceService") || !slices.Contains(got, "grpc.reflection.v1.ServerReflection") {
		t.Errorf("got %v %v, want inference.GRPCInferenceService and grpc.reflection.v1.ServerReflection", got, err)
	}
}

// TestTLSAndToken: over TLS with client certificates and a token file,
// the health probes and reflection need no token, every other RPC does;
// a client without a certificate is refused at the handshake.
func TestTLSAndToken(t *testing.T) {
	pki := tlstest.New(t, "grpc")
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("# clients\ns3cret-token\nadm1n-token admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := startDoor(t, grpcdoor.Config{Config: door.Config{TLSCertFile: pki.ServerCert, TLSKeyFile: pki.ServerKey, TLSClientCAFile: pki.CA, TokenFile: tokens}},
		served{name: "add", file: "add_f32"})
	cc := dial(t, addr, credentials.NewTLS(pki.ClientTLS(t, true)))
	c := kservepb.NewGRPCInferenceServiceClient(cc)
	ctx := callCtx(t)
	if r, err := c.ServerLive(ctx, &kservepb.ServerLiveRequest{}); err != nil || !r.Live {
		t.Errorf("ServerLive without a token: got %v %v, want live", r, err)
	}
	if r, err := c.ServerReady(ctx, &kservepb.ServerReadyRequest{}); err != nil || !r.Ready {
		t.Errorf("ServerReady without a token: got %v %v, want ready", r, err)
	}
	if r, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("grpc.health.v1 Check without a token: got %v %v, want SERVING", r, err)
	}
	if got, err := listServices(ctx, rpb.NewServerReflectionClient(cc)); err != nil || !slices.Contains(got, "inference.GRPCInferenceService") {
		t.Errorf("reflection without a token: got %v %v, want the service listed", got, err)
	}
	req := &kservepb.ModelInferRequest{ModelName: "add", Inputs: []*inferInput{{Name: "x", Datatype: "FP32", Shape: []int64{1, 4},
		Contents: &kservepb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4}}}}}
	for _, tc := range []struct {
		name, auth string
		want       codes.Code
	}{
		{"no token", "", codes.Unauthenticated},
		{"wrong token", "Bearer nope", codes.Unauthenticated},
		{"basic scheme", "Basic s3cret-token", codes.Unauthenticated},
		{"token", "Bearer s3cret-token", codes.OK},
		{"lower-case scheme", "bearer s3cret-token", codes.OK},
		{"admin token", "Bearer adm1n-token", codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctx
			if tc.auth != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", tc.auth)
			}
			_, err := c.ModelInfer(ctx, req)
			_, merr := c.ModelMetadata(ctx, &kservepb.ModelMetadataRequest{Name: "add"})
			_, rerr := c.ModelReady(ctx, &kservepb.ModelReadyRequest{Name: "add"})
			_, serr := c.ServerMetadata(ctx, &kservepb.ServerMetadataRequest{})
			for what, err := range map[string]error{"ModelInfer": err, "ModelMetadata": merr, "ModelReady": rerr, "ServerMetadata": serr} {
				if status.Code(err) != tc.want {
					t.Errorf("%s: got %v, want %v", what, err, tc.want)
				}
			}
		})
	}
	// No client certificate: the handshake fails, no RPC gets through.
	bare := kservepb.NewGRPCInferenceServiceClient(dial(t, addr, credentials.NewTLS(pki.ClientTLS(t, false))))
	if _, err := bare.ServerLive(ctx, &kservepb.ServerLiveRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("without a client certificate: got %v, want Unavailable (handshake refused)", err)
	}
}
