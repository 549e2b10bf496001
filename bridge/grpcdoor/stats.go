package grpcdoor

import (
	"context"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// ModelStatistics answers Triton's statistics extension as the HTTP
// door's GET /v2/models[/{m}[/versions/{v}]]/stats does: the statistics
// of the served models named req.Name at req.Version ("" name: every
// model; "" version: every version), summed over the mesh's workers
// (door.Statistics). NotFound for a model or version the door does not
// serve. It needs a token of role infer (see need).
func (d *Door) ModelStatistics(ctx context.Context, req *kservepb.ModelStatisticsRequest) (*kservepb.ModelStatisticsResponse, error) {
	res, err := door.Statistics(ctx, d.sub, d.cfg.Catalog, d.models(), req.Name, req.Version)
	if err != nil {
		return nil, grpcError(err)
	}
	return res, nil
}
