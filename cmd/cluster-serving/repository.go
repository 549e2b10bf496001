package main

import (
	"context"
	"fmt"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	httpdoor "github.com/cluster-serving/cluster-serving/bridge/httpdoor"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// doorRepository adapts the node's model repository to the HTTP door's
// Repository and the gRPC door's door.Catalog (the doors do not import
// serving).
type doorRepository struct{ r *serving.Repository }

var _ httpdoor.Repository = doorRepository{}

func (d doorRepository) Models() []door.Model { return doorModels(d.r.Models()) }

func (d doorRepository) Index(ready bool) []door.ModelState { return d.r.Index(ready) }

func (d doorRepository) Load(ctx context.Context, name string) error   { return d.r.Load(ctx, name) }
func (d doorRepository) Unload(ctx context.Context, name string) error { return d.r.Unload(ctx, name) }

// defaultModelPath is the model file `predict -fill` describes: modelPath,
// the first of models, or the model of modelRepository named jobName.
func defaultModelPath(file *serving.File) (string, error) {
	if file.ModelRepository == "" {
		if len(file.Models) > 0 {
			return file.Models[0].Path, nil
		}
		return file.ModelPath, nil
	}
	entries, err := serving.ScanRepository(file.ModelRepository)
	if err != nil {
		return "", fmt.Errorf("config key \"modelRepository\": %w", err)
	}
	for _, e := range entries {
		if e.Name == file.JobName {
			return e.Path, e.Err
		}
	}
	return "", fmt.Errorf("config key \"modelRepository\": no model directory named %q (jobName), the model predict calls", file.JobName)
}
