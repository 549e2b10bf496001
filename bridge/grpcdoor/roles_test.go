package grpcdoor

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/cluster-serving/cluster-serving/bridge/door"
)

// TestAuthorizeRoles: with a token file holding an infer and an admin
// token, an admin-only method (adminMethods) answers an infer token
// PermissionDenied and no token Unauthenticated, and lets the admin token
// in; every other method takes either token; exempt ones take none.
func TestAuthorizeRoles(t *testing.T) {
	const inferTok, adminTok = "planted-grpc-infer-3e9a", "planted-grpc-admin-77c4"
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(inferTok+"\n"+adminTok+" admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := door.NewTokens(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	d := &Door{tokens: tokens}
	const (
		load  = "/" + kserveService + "/RepositoryModelLoad"
		infer = "/" + kserveService + "/ModelInfer"
		live  = "/" + kserveService + "/ServerLive"
	)
	for _, tc := range []struct {
		method string
		auth   []string
		want   codes.Code
	}{
		{load, nil, codes.Unauthenticated},
		{load, []string{"Bearer nope"}, codes.Unauthenticated},
		{load, []string{"Bearer " + inferTok}, codes.PermissionDenied},
		{load, []string{"Bearer " + adminTok}, codes.OK},
		{load, []string{"Bearer " + inferTok, "Bearer " + adminTok}, codes.OK},
		{"/" + kserveService + "/RepositoryIndex", []string{"Bearer " + inferTok}, codes.PermissionDenied},
		{"/" + kserveService + "/RepositoryModelUnload", []string{"Bearer " + inferTok}, codes.PermissionDenied},
		{infer, nil, codes.Unauthenticated},
		{infer, []string{"Bearer " + inferTok}, codes.OK},
		{infer, []string{"Bearer " + adminTok}, codes.OK},
		{live, nil, codes.OK},
	} {
		md := metadata.MD{}
		for _, a := range tc.auth {
			md.Append("authorization", a)
		}
		err := d.authorize(md, tc.method)
		if grpcstatus.Code(err) != tc.want {
			t.Errorf("%s with %d tokens: got %v, want %v", tc.method, len(tc.auth), err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "planted") {
			t.Errorf("%s: the error holds a token: %v", tc.method, err)
		}
		if tc.want == codes.PermissionDenied && !strings.Contains(err.Error(), "role admin") {
			t.Errorf("%s: got %v, want it to name role admin", tc.method, err)
		}
	}
}

// TestCodeForbidden: a 403 *status.Error (a load or unload that the model
// control mode refuses) maps to PermissionDenied, as the role check does.
func TestCodeForbidden(t *testing.T) {
	if got := Code(403); got != codes.PermissionDenied {
		t.Errorf("Code(403): got %v, want PermissionDenied", got)
	}
}

// Registering and unregistering shared memory needs role admin (the door
// maps a file of its host); listing regions, role infer.
func TestSHMRoles(t *testing.T) {
	for method, want := range map[string]door.Role{
		"SystemSharedMemoryRegister":   door.RoleAdmin,
		"SystemSharedMemoryUnregister": door.RoleAdmin,
		"CudaSharedMemoryRegister":     door.RoleAdmin,
		"CudaSharedMemoryUnregister":   door.RoleAdmin,
		"SystemSharedMemoryStatus":     door.RoleInfer,
		"CudaSharedMemoryStatus":       door.RoleInfer,
	} {
		if got := need("/" + kserveService + "/" + method); got != want {
			t.Errorf("%s: got role %v, want %v", method, got, want)
		}
	}
}
