package grpcdoor

import "github.com/cluster-serving/cluster-serving/bridge/door"

// adminMethods are the RPCs that need a token of role admin (a line
// "TOKEN admin" of the token file): model control, as the HTTP door's
// /v2/repository/ routes: the index too, which tells every model on disk
// and why it fails; and registering shared memory, which makes the door
// map a file of its host. Declare a new admin-only RPC here, by its full
// name.
var adminMethods = map[string]bool{
	"/" + kserveService + "/RepositoryIndex":       true,
	"/" + kserveService + "/RepositoryModelLoad":   true,
	"/" + kserveService + "/RepositoryModelUnload": true,

	"/" + kserveService + "/SystemSharedMemoryRegister":   true,
	"/" + kserveService + "/SystemSharedMemoryUnregister": true,
	"/" + kserveService + "/CudaSharedMemoryRegister":     true,
	"/" + kserveService + "/CudaSharedMemoryUnregister":   true,
}

// need returns the role method needs: admin for adminMethods, infer for
// the rest.
func need(method string) door.Role {
	if adminMethods[method] {
		return door.RoleAdmin
	}
	return door.RoleInfer
}
