package grpcdoor

import (
	"testing"

	"github.com/cluster-serving/cluster-serving/bridge/door"
)

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
