// Package door holds what the HTTP and gRPC doors share: the models they
// serve and the mesh they send work to, the catalog of a model repository
// whose models change at runtime, the bearer-token file, the TLS files
// and the token bucket (the config keys httpAuthTokenFile, httpTlsCert,
// httpTlsKey, httpTlsClientCa and tokensPerSecond serve both doors).
package door

import (
	"context"
	"strings"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// Submitter sends one request to a job's work queue and waits for its
// result. *mesh.Client implements it. It must be safe for concurrent use;
// it returns a *status.Error for a non-200 result, mesh.ErrQueueFull when
// the queue is full and ctx.Err() when ctx ends first: a door answers
// with status.Of of the error (the gRPC door with its code).
type Submitter interface {
	Submit(ctx context.Context, job string, req mesh.Request) (mesh.Result, error)
}

// Model is one served model: what a door lists and where it sends work.
type Model struct {
	// Name and Version identify the model in requests. Version default "1".
	Name    string
	Version string
	// Job is the mesh job whose workers serve the model.
	Job string
	// Info describes the inputs and outputs, for the metadata a door
	// answers and the example a /predict 400 shows.
	Info infer.ModelInfo
	// Config is the model's Triton configuration, completed (its
	// config.pbtxt and the graph, see infer/modelconfig), as a door
	// answers it (GET /v2/models/{m}/config, gRPC ModelConfig). nil: the
	// door completes one from Info (ConfigOf).
	Config *kservepb.ModelConfig
}

// ConfigOf is m's Triton configuration: m.Config, or one completed from
// m.Info when it has none (a model served without a repository).
func ConfigOf(m Model) *kservepb.ModelConfig {
	if m.Config != nil {
		return m.Config
	}
	return modelconfig.Complete(nil, m.Name, m.Info, 0)
}

// PlatformOf is m's platform as model metadata names it: its config's
// ("ensemble" for an ensemble), else ONNX Runtime's.
func PlatformOf(m Model) string {
	if m.Config != nil && m.Config.Platform != "" {
		return m.Config.Platform
	}
	return modelconfig.Platform
}

// Extensions are the protocol extensions both doors serve, as HTTP GET
// /v2 and gRPC ServerMetadata list them (Triton's names), given whether
// the door has a model repository to control.
func Extensions(repository bool) []string {
	ext := []string{"model_configuration", "system_shared_memory", "binary_tensor_data", "statistics"}
	if repository {
		ext = append([]string{"model_repository"}, ext...)
	}
	return ext
}

// Catalog lists the served models when they change at runtime: a model
// repository loads and unloads them. cmd passes one adapter of the
// node's repository to both doors, so that they see the same models. Its
// methods must be safe for concurrent use.
type Catalog interface {
	// Models lists the models that serve now, at their serving version
	// ("" means "1"), the default model (POST /predict) first.
	Models() []Model
	// Index lists every model known, loaded or not; with ready, only
	// those that serve.
	Index(ready bool) []ModelState
}

// ModelState is one model of a repository's index, as the repository
// extension answers it (the mesh's type: processes publish the same for
// the status page).
type ModelState = mesh.ModelState

// Models lists the models a door serves: the catalog's when there is
// one, each with its Version defaulted to "1", else fixed.
func Models(c Catalog, fixed []Model) []Model {
	if c == nil {
		return fixed
	}
	models := c.Models()
	for i := range models {
		if models[i].Version == "" {
			models[i].Version = "1"
		}
	}
	return models
}

// UnknownModel is the 404 *status.Error of model name, which does not
// serve: "not loaded" with its state and reason when the catalog (nil
// for none) knows it, else "unknown model". Both doors answer it.
func UnknownModel(c Catalog, name string) error {
	if c != nil {
		for _, e := range c.Index(false) {
			if e.Name == name {
				why := strings.ToLower(e.State)
				if e.Reason != "" {
					why += ": " + e.Reason
				}
				return status.Errorf(status.NotFound, "model %q is not loaded (%s)", name, why)
			}
		}
	}
	return status.Errorf(status.NotFound, "unknown model %q", name)
}
