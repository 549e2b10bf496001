package door

import (
	"context"

	"github.com/cluster-serving/cluster-serving/infer/status"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// StatsSource sums the inference statistics of jobs' workers over the
// mesh, asking it once. A door reads statistics through its Submitter when
// it implements StatsSource, as *mesh.Client does (Client.StatsOf, whose
// wait it shares). It must be safe for concurrent use.
type StatsSource interface {
	StatsOf(ctx context.Context, jobs ...string) (map[string]mesh.ModelStats, error)
}

// Statistics answers Triton's statistics extension for both doors: the
// statistics of the served models (models) named name at version, every
// version when version is "", every model when name is "". Each model's
// statistics are its job's workers' summed, with the response cache's
// hits and misses at every door (mesh.Client.StatsOf); the
// mesh is asked once, so the answer takes one wait however many models it
// names. A model that does not serve is a 404 *status.Error (see Lookup),
// a Submitter that is no StatsSource a 500 saying so, and a mesh that
// cannot be asked its error.
func Statistics(ctx context.Context, sub Submitter, c Catalog, models []Model, name, version string) (*kservepb.ModelStatisticsResponse, error) {
	var picked []Model
	for _, m := range models {
		if (name == "" || m.Name == name) && (version == "" || m.Version == version) {
			picked = append(picked, m)
		}
	}
	if name != "" && len(picked) == 0 {
		_, err := Lookup(models, c, name, version)
		return nil, err
	}
	src, ok := sub.(StatsSource)
	if !ok {
		return nil, status.Errorf(status.Internal, "statistics: the door's Submitter (%T) cannot sum the mesh's statistics", sub)
	}
	jobs := make([]string, len(picked))
	for i, m := range picked {
		jobs[i] = m.Job
	}
	all, err := src.StatsOf(ctx, jobs...)
	if err != nil {
		return nil, err
	}
	out := make([]*kservepb.ModelStatistics, len(picked))
	for i, m := range picked {
		out[i] = modelStatistics(m, all[m.Job])
	}
	return &kservepb.ModelStatisticsResponse{ModelStats: out}, nil
}

// modelStatistics is st, the statistics of m's job, in Triton's shape.
func modelStatistics(m Model, st mesh.ModelStats) *kservepb.ModelStatistics {
	out := &kservepb.ModelStatistics{
		Name:           m.Name,
		Version:        m.Version,
		LastInference:  st.LastInference,
		InferenceCount: st.InferenceCount,
		ExecutionCount: st.ExecutionCount,
		InferenceStats: &kservepb.InferStatistics{
			Success:       duration(st.Success),
			Fail:          duration(st.Fail),
			Queue:         duration(st.Queue),
			ComputeInput:  duration(st.ComputeInput),
			ComputeInfer:  duration(st.ComputeInfer),
			ComputeOutput: duration(st.ComputeOutput),
			// The response cache's lookups at every door of the mesh
			// (mesh.Cache.Count): a hit is a success too.
			CacheHit:  duration(st.CacheHit),
			CacheMiss: duration(st.CacheMiss),
		},
		BatchStats: make([]*kservepb.InferBatchStatistics, len(st.Batches)),
	}
	for i, b := range st.Batches {
		out.BatchStats[i] = &kservepb.InferBatchStatistics{BatchSize: b.Size, ComputeInput: duration(b.ComputeInput),
			ComputeInfer: duration(b.ComputeInfer), ComputeOutput: duration(b.ComputeOutput)}
	}
	return out
}

func duration(d mesh.StatDuration) *kservepb.StatisticDuration {
	return &kservepb.StatisticDuration{Count: d.Count, Ns: d.NS}
}
