package grpcdoor_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	grpcdoor "github.com/cluster-serving/cluster-serving/bridge/grpcdoor"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// TestUnsupported: the RPCs of Triton's the door does not serve answer
// Unimplemented saying what to use instead.
func TestUnsupported(t *testing.T) {
	c := inferClient(t, startDoor(t, grpcdoor.Config{}, served{name: "add", file: "add_f32"}))
	ctx := callCtx(t)
	_, cuda := c.CudaSharedMemoryRegister(ctx, &kservepb.CudaSharedMemoryRegisterRequest{Name: "r", ByteSize: 16})
	_, trace := c.TraceSetting(ctx, &kservepb.TraceSettingRequest{})
	_, logs := c.LogSettings(ctx, &kservepb.LogSettingsRequest{})
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"CudaSharedMemoryRegister", cuda, "CUDA shared memory is not supported; use system shared memory"},
		{"TraceSetting", trace, "tracesExporter"},
		{"LogSettings", logs, "logLevel"},
	} {
		if status.Code(tc.err) != codes.Unimplemented || !strings.Contains(status.Convert(tc.err).Message(), tc.want) {
			t.Errorf("%s: got %v, want Unimplemented with %q", tc.name, tc.err, tc.want)
		}
	}
}
