package grpcdoor

import (
	"context"
	"maps"
	"slices"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// The model repository extension's RPCs, as the HTTP door's
// /v2/repository/ routes: RepositoryIndex needs a Catalog, load and
// unload a Catalog that is a door.Control; without, they answer
// Unimplemented. All three need a token of role admin (adminMethods).

// errNoRepository answers the repository RPCs of a door without a model
// repository.
var errNoRepository = grpcstatus.Error(codes.Unimplemented,
	"this server has no model repository: start it with the config key modelRepository")

// RepositoryIndex lists every model of the repository, loaded or not
// (with ready, only those that serve), with its state and the reason it
// does not serve. A repository_name is InvalidArgument: there is one.
func (d *Door) RepositoryIndex(_ context.Context, req *kservepb.RepositoryIndexRequest) (*kservepb.RepositoryIndexResponse, error) {
	if d.cfg.Catalog == nil {
		return nil, errNoRepository
	}
	if err := door.OneRepository(req.RepositoryName); err != nil {
		return nil, grpcError(err)
	}
	out := &kservepb.RepositoryIndexResponse{Models: []*kservepb.RepositoryIndexResponse_ModelIndex{}}
	for _, m := range d.cfg.Catalog.Index(req.Ready) {
		out.Models = append(out.Models, &kservepb.RepositoryIndexResponse_ModelIndex{Name: m.Name, Version: m.Version, State: m.State, Reason: m.Reason})
	}
	return out, nil
}

// RepositoryModelLoad loads or reloads the newest version of model_name
// and answers once it serves. Any parameter (Triton's config and file:
// overrides) is InvalidArgument; see control for the other codes.
func (d *Door) RepositoryModelLoad(ctx context.Context, req *kservepb.RepositoryModelLoadRequest) (*kservepb.RepositoryModelLoadResponse, error) {
	err := d.control(ctx, "load", door.Control.Load, req.RepositoryName, req.ModelName, slices.Collect(maps.Keys(req.Parameters)))
	if err != nil {
		return nil, err
	}
	return &kservepb.RepositoryModelLoadResponse{}, nil
}

// RepositoryModelUnload stops serving model_name. The parameter
// unload_dependents (Triton's, for ensembles, which do not exist here) is
// taken and ignored; any other is InvalidArgument.
func (d *Door) RepositoryModelUnload(ctx context.Context, req *kservepb.RepositoryModelUnloadRequest) (*kservepb.RepositoryModelUnloadResponse, error) {
	err := d.control(ctx, "unload", door.Control.Unload, req.RepositoryName, req.ModelName, slices.Collect(maps.Keys(req.Parameters)), "unload_dependents")
	if err != nil {
		return nil, err
	}
	return &kservepb.RepositoryModelUnloadResponse{}, nil
}

// control loads or unloads (do, named what) model name through the Catalog's
// door.Control, after checking the request; the error is a gRPC status:
// NotFound for an unknown model, InvalidArgument for one that fails to
// load, PermissionDenied when the model control mode refuses (the HTTP
// door's 403), Unavailable when the node is not running.
func (d *Door) control(ctx context.Context, what string, do func(door.Control, context.Context, string) error, repository, name string, params []string, known ...string) error {
	ctl := door.ControlOf(d.cfg.Catalog)
	if ctl == nil {
		return errNoRepository
	}
	if err := door.OneRepository(repository); err != nil {
		return grpcError(err)
	}
	if name == "" {
		return grpcstatus.Errorf(codes.InvalidArgument, "model_name is empty: name the model to %s", what)
	}
	if err := door.UnsupportedParameters(params, known...); err != nil {
		return grpcError(err)
	}
	if err := door.ControlError(what, name, do(ctl, ctx, name)); err != nil {
		return grpcError(err)
	}
	return nil
}
