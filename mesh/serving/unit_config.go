package serving

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// withSettings returns e with a config.pbtxt's settings in force, as
// Triton applies them:
//   - max_batch_size 0: the model has no batch dimension; every request
//     runs alone (batching off).
//   - max_batch_size N > 0 without dynamic_batching: every request runs
//     alone, as its own batch; none is stacked with another's records.
//   - with dynamic_batching: the records of concurrent requests stack
//     along dim 0 up to N rows (batching on, MaxBatch N), a batch waiting
//     up to max_queue_delay_microseconds to fill (MaxWait), unless the
//     queue reaches a preferred_batch_size (PreferredBatch).
//   - instance_group counts: that many ONNX Runtime sessions
//     (Parallelism); KIND_GPU or an execution accelerator: the execution
//     provider; parameters intra_op_thread_count: Threads.
func withSettings(e infer.Config, s modelconfig.Settings) infer.Config {
	e.Batching = infer.BatchingOff
	if s.MaxBatch > 0 {
		e.MaxBatch, e.MaxRequestBatch = s.MaxBatch, s.MaxBatch
	}
	if s.MaxBatch > 0 && s.Dynamic {
		e.Batching, e.MaxWait, e.HoldIdle, e.PreferredBatch = infer.BatchingOn, s.MaxQueueDelay, true, s.Preferred
	}
	if s.Instances > 0 {
		e.Parallelism = s.Instances
	}
	e.ExecutionProvider = cmp.Or(s.ExecutionProvider, e.ExecutionProvider)
	e.Threads = cmp.Or(s.Threads, e.Threads)
	e.Reshape = s.EngineReshape()
	return e
}

// batchReason is the worker's batching reason (status, model metadata)
// of a model configured by a config.pbtxt: what its settings made of
// batching, with the max batch size and delay in force.
func batchReason(s modelconfig.Settings) string {
	switch {
	case s.MaxBatch == 0:
		return "config.pbtxt: max_batch_size 0 (no batch dimension): each request runs alone"
	case !s.Dynamic:
		return fmt.Sprintf("config.pbtxt: max_batch_size %d without dynamic_batching: each request runs alone, as its own batch", s.MaxBatch)
	}
	why := fmt.Sprintf("config.pbtxt: dynamic_batching, max_batch_size %d, max_queue_delay %v", s.MaxBatch, s.MaxQueueDelay)
	// Auto-complete makes [max_batch_size] the preferred size, which is
	// what the batcher aims at anyway.
	if len(s.Preferred) > 0 && !slices.Equal(s.Preferred, []int{s.MaxBatch}) {
		why += fmt.Sprintf(", preferred_batch_size %v", s.Preferred)
	}
	return why
}

// completeConfig is the model's completed Triton configuration: raw (its
// config.pbtxt; nil: none) with what it leaves out filled from the graph
// info, the engine's batch size as max_batch_size of a model without one
// that batches, and the engine config e with the completed config's
// settings in force. A config.pbtxt that does not fit the graph is an
// error wrapping ErrModelConfig that names the field at fault.
func completeConfig(raw *kservepb.ModelConfig, name string, info infer.ModelInfo, e infer.Config) (*kservepb.ModelConfig, infer.Config, error) {
	completed := modelconfig.Complete(raw, name, info, cmp.Or(e.MaxBatch, infer.DefaultMaxBatch))
	if raw == nil {
		return completed, e, nil
	}
	if err := modelconfig.Check(completed, info); err != nil {
		return nil, e, fmt.Errorf("%w: model %q: config.pbtxt: %w", ErrModelConfig, name, err)
	}
	return completed, withSettings(e, modelconfig.SettingsOf(completed)), nil
}

// configured completes and checks raw (a config.pbtxt; nil: none, then
// it returns nil and e as they are) against model's graph, read without
// serving it (one session opened and closed: what the config says about
// batching and instances decides how the engine loads), and returns the
// completed config with the engine config it sets.
func configured(raw *kservepb.ModelConfig, model Model, e infer.Config) (*kservepb.ModelConfig, infer.Config, error) {
	if raw == nil {
		return nil, e, nil
	}
	info, err := ReadInfo(e.ModelPath, e.ModelKey)
	if err != nil {
		return nil, e, err
	}
	return completeConfig(raw, model.Name, info, e)
}

// describeModel is model as a node that does not serve it describes it:
// its graph read from its path, the batching its workers decide with
// engine settings e (and raw's, a config.pbtxt; nil: none), and its
// completed configuration.
func describeModel(model Model, raw *kservepb.ModelConfig, e infer.Config) (Model, error) {
	e.Batching = cmp.Or(model.Batching, e.Batching)
	info, err := ReadInfo(model.Path, e.ModelKey)
	if err != nil {
		return model, err
	}
	if raw != nil {
		// The graph as ONNX Runtime reads it, for the check.
		model.Config, e, err = completeConfig(raw, model.Name, info, e)
	}
	if err == nil {
		info, err = infer.DecideBatching(info, e.Batching)
	}
	if err != nil {
		return model, err
	}
	if raw == nil {
		model.Config, _, _ = completeConfig(nil, model.Name, info, e)
	} else {
		info.BatchReason = batchReason(modelconfig.SettingsOf(model.Config))
	}
	model.Info = info
	return model, nil
}

// queueStream is s with the queue settings of a model's completed
// config: its priority levels, and each level's queue bound: the
// largest max_queue_size of its levels plus one batch per instance, as
// Triton's counts the requests waiting, not those running (-1 without
// one, so that a bound a config no longer sets goes).
func queueStream(s mesh.StreamConfig, cfg *kservepb.ModelConfig) mesh.StreamConfig {
	q := modelconfig.QueueOf(cfg)
	s.Levels, s.DefaultLevel, s.MaxQueue = q.Levels, q.DefaultLevel, -1
	if n := q.MaxQueueSize(); n > 0 {
		running := max(int(cfg.GetMaxBatchSize()), 1) * max(modelconfig.SettingsOf(cfg).Instances, 1)
		s.MaxQueue = int64(n + running)
	}
	return s
}
