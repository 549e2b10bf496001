package grpcdoor_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

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
	// want is the answer of the RPCs an infer token may call, admin that
	// of the repository RPCs (Unimplemented once let in: this door has no
	// repository), unserved that of the RPCs the door does not serve.
	for _, tc := range []struct {
		name, auth            string
		want, admin, unserved codes.Code
	}{
		{"no token", "", codes.Unauthenticated, codes.Unauthenticated, codes.Unauthenticated},
		{"wrong token", "Bearer nope", codes.Unauthenticated, codes.Unauthenticated, codes.Unauthenticated},
		{"basic scheme", "Basic s3cret-token", codes.Unauthenticated, codes.Unauthenticated, codes.Unauthenticated},
		{"token", "Bearer s3cret-token", codes.OK, codes.PermissionDenied, codes.Unimplemented},
		{"lower-case scheme", "bearer s3cret-token", codes.OK, codes.PermissionDenied, codes.Unimplemented},
		{"admin token", "Bearer adm1n-token", codes.OK, codes.Unimplemented, codes.Unimplemented},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctx
			if tc.auth != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", tc.auth)
			}
			for what, call := range securedCalls(cc, req) {
				want := tc.want
				switch {
				case strings.HasPrefix(what, "Repository"):
					want = tc.admin
				case strings.HasSuffix(what, "Settings") || what == "TraceSetting":
					want = tc.unserved
				}
				if err := call(ctx); status.Code(err) != want {
					t.Errorf("%s: got %v, want %v", what, err, want)
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

// securedCalls are the calls of every RPC of the service that needs a
// token (the shared memory RPCs are shm_roles_test.go's), by name; each returns the call's error. The unary ones are
// invoked by name, their answers read as Empty (only the code counts).
func securedCalls(cc *grpc.ClientConn, req *kservepb.ModelInferRequest) map[string]func(context.Context) error {
	calls := map[string]func(context.Context) error{
		"ModelStreamInfer": func(ctx context.Context) error {
			r, err := streamOnce(ctx, kservepb.NewGRPCInferenceServiceClient(cc), req)
			if err == nil && r.ErrorMessage != "" {
				return errors.New(r.ErrorMessage)
			}
			return err
		},
	}
	for name, in := range map[string]proto.Message{
		"ModelInfer": req, "ModelMetadata": &kservepb.ModelMetadataRequest{Name: "add"}, "ModelReady": &kservepb.ModelReadyRequest{Name: "add"},
		"ModelConfig": &kservepb.ModelConfigRequest{Name: "add"}, "ServerMetadata": &kservepb.ServerMetadataRequest{},
		"RepositoryIndex": &kservepb.RepositoryIndexRequest{}, "RepositoryModelLoad": &kservepb.RepositoryModelLoadRequest{ModelName: "add"},
		"RepositoryModelUnload": &kservepb.RepositoryModelUnloadRequest{ModelName: "add"},
		"TraceSetting":          &kservepb.TraceSettingRequest{}, "LogSettings": &kservepb.LogSettingsRequest{},
	} {
		calls[name] = func(ctx context.Context) error {
			return cc.Invoke(ctx, "/inference.GRPCInferenceService/"+name, in, &emptypb.Empty{})
		}
	}
	return calls
}
