package grpcdoor

import "github.com/cluster-serving/cluster-serving/bridge/door"

// adminMethods are the RPCs that need a token of role admin (a line
// "TOKEN admin" of the token file): model control, as the HTTP door's
// /v2/repository/ routes. None is served yet; Triton's model repository
// RPCs are declared so that serving one later cannot open it to every
// infer token. Declare a new admin-only RPC here, by its full name.
var adminMethods = map[string]bool{
	"/" + kserveService + "/RepositoryIndex":       true,
	"/" + kserveService + "/RepositoryModelLoad":   true,
	"/" + kserveService + "/RepositoryModelUnload": true,
}

// need returns the role method needs: admin for adminMethods, infer for
// the rest.
func need(method string) door.Role {
	if adminMethods[method] {
		return door.RoleAdmin
	}
	return door.RoleInfer
}
