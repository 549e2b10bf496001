package door

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/cluster-serving/cluster-serving/infer/status"
)

// Control loads and unloads the models of a model repository, behind
// the repository extension's load and unload (HTTP POST
// /v2/repository/models/{m}/load, gRPC RepositoryModelLoad). A door
// whose Catalog is also a Control serves them; cmd's adapter of the
// node's repository is both. Its methods must be safe for concurrent
// use.
type Control interface {
	// Load loads or reloads a model's newest version and returns once it
	// serves; Unload stops serving it. They return a *status.Error (404
	// for an unknown model, 400 for one that fails to load, with the
	// reason, 403 when the model control mode refuses) or ctx's error.
	Load(ctx context.Context, name string) error
	Unload(ctx context.Context, name string) error
}

// ControlOf is c as a Control, or nil when c (nil for none) cannot load
// and unload.
func ControlOf(c Catalog) Control {
	ctl, _ := c.(Control)
	return ctl
}

// ControlError is the error a door answers for a load or unload (what)
// of model name that failed with err: err itself when it is a
// *status.Error or ctx's, else a 503 naming the model (the node is not
// running, say), so that no door answers an unclassified 500.
func ControlError(what, name string, err error) error {
	var se *status.Error
	if err == nil || errors.As(err, &se) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return status.Errorf(status.Busy, "%s model %q: %v", what, name, err)
}

// UnsupportedParameters is the 400 for the parameters of a load or
// unload request (names) that are not in known, naming them sorted; nil
// when all are known. A door refuses them since it would otherwise
// ignore them silently (Triton's config and file: overrides: models load
// from the repository directory as they are).
func UnsupportedParameters(names []string, known ...string) error {
	var unknown []string
	for _, n := range names {
		if !slices.Contains(known, n) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return status.Errorf(status.BadInput, "unsupported parameters %s: models load from the repository directory as they are",
		strings.Join(unknown, ", "))
}

// OneRepository is the 400 for a request naming a repository
// (repository_name): the server has one, and a name would otherwise be
// ignored. nil for "".
func OneRepository(name string) error {
	if name == "" {
		return nil
	}
	return status.Errorf(status.BadInput, "unknown repository_name %q: this server has one model repository; leave it out", name)
}
