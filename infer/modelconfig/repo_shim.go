package modelconfig

// TEMPORARY SHIM (helper "repo", issue 22): a minimal stand-in for the
// functions helper "cfg" writes in this package (Read, Check, Settings,
// SettingsOf, Versions), so that mesh/serving builds and its tests run
// against real config.pbtxt files. The lead deletes this file at merge,
// keeping cfg's versions.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// Read parses modelDir/config.pbtxt; (nil, nil, nil) when there is none.
// Unknown fields are dropped with a warning.
func Read(modelDir string) (*kservepb.ModelConfig, []string, error) {
	path := filepath.Join(modelDir, "config.pbtxt")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	cfg := &kservepb.ModelConfig{}
	var warnings []string
	if err := prototext.Unmarshal(b, cfg); err != nil {
		if !strings.Contains(err.Error(), "unknown field") {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		warnings = append(warnings, fmt.Sprintf("%s: %v (ignored)", path, err))
		cfg = &kservepb.ModelConfig{}
		if err := (prototext.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, cfg); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return cfg, warnings, nil
}

// Check reports what of cfg this server cannot serve as the graph info is
// (in the words of cfg's real Check, shortened).
func Check(cfg *kservepb.ModelConfig, info infer.ModelInfo) error {
	if (cfg.Platform != "" && cfg.Platform != Platform) || (cfg.Backend != "" && cfg.Backend != Backend) {
		return fmt.Errorf("platform %q backend %q: only ONNX models serve here (platform %q, backend %q): export the model to ONNX (tf2onnx, torch.onnx.export)",
			cfg.Platform, cfg.Backend, Platform, Backend)
	}
	if b, err := infer.DecideBatching(info, infer.BatchingAuto); cfg.MaxBatchSize > 0 && err == nil && !b.DynamicBatch {
		return fmt.Errorf("max_batch_size %d: model does not support batching while non-zero max_batch_size is specified (%s); set max_batch_size: 0",
			cfg.MaxBatchSize, b.BatchReason)
	}
	check := func(field, name string, dt kservepb.DataType, dims []int64, ios []infer.IO) error {
		i := slices.IndexFunc(ios, func(io infer.IO) bool { return io.Name == name })
		if i < 0 {
			return fmt.Errorf("%s: unexpected tensor '%s'", field, name)
		}
		if want := DataType(ios[i].DType); dt != want {
			return fmt.Errorf("%s.data_type: configuration expects %s for '%s', model provides %s", field, dt, name, want)
		}
		full := dims
		if cfg.MaxBatchSize > 0 {
			full = append([]int64{-1}, dims...)
		}
		graph := ios[i].Shape
		ok := len(graph) == len(full) || (len(graph) == 0 && slices.Equal(dims, []int64{1}))
		for j := 0; ok && j < min(len(full), len(graph)); j++ {
			ok = graph[j] < 0 || full[j] < 0 || graph[j] == full[j]
		}
		if !ok {
			return fmt.Errorf("%s.dims: model '%s', tensor '%s': the model expects shape %v, the configuration %v", field, cfg.Name, name, graph, full)
		}
		return nil
	}
	for i, in := range cfg.Input {
		if err := check(fmt.Sprintf("input[%d]", i), in.Name, in.DataType, in.Dims, info.Inputs); err != nil {
			return err
		}
	}
	for i, out := range cfg.Output {
		if err := check(fmt.Sprintf("output[%d]", i), out.Name, out.DataType, out.Dims, info.Outputs); err != nil {
			return err
		}
	}
	return nil
}

// Settings are the engine settings a config sets.
type Settings struct {
	MaxBatch          int
	Dynamic           bool
	Preferred         []int
	MaxQueueDelay     time.Duration
	Instances         int
	ExecutionProvider string
	Reshape           map[string][]int64
	Parameters        map[string]string
}

// SettingsOf is what cfg sets.
func SettingsOf(cfg *kservepb.ModelConfig) Settings {
	s := Settings{MaxBatch: int(cfg.MaxBatchSize)}
	if db := cfg.GetDynamicBatching(); db != nil {
		s.Dynamic = true
		s.MaxQueueDelay = time.Duration(db.MaxQueueDelayMicroseconds) * time.Microsecond
		for _, p := range db.PreferredBatchSize {
			s.Preferred = append(s.Preferred, int(p))
		}
	}
	for _, g := range cfg.InstanceGroup {
		s.Instances += int(max(g.Count, 1))
		if g.Kind == kservepb.ModelInstanceGroup_KIND_GPU {
			s.ExecutionProvider = infer.ProviderCUDA
		}
	}
	for _, a := range cfg.GetOptimization().GetExecutionAccelerators().GetGpuExecutionAccelerator() {
		if a.Name == "tensorrt" {
			s.ExecutionProvider = infer.ProviderTensorRT
		}
	}
	for _, a := range cfg.GetOptimization().GetExecutionAccelerators().GetCpuExecutionAccelerator() {
		if a.Name == "openvino" {
			s.ExecutionProvider = infer.ProviderOpenVINO
		}
	}
	for _, in := range cfg.Input {
		if r := in.GetReshape(); r != nil {
			if s.Reshape == nil {
				s.Reshape = map[string][]int64{}
			}
			s.Reshape[in.Name] = r.Shape
		}
	}
	for k, v := range cfg.Parameters {
		if s.Parameters == nil {
			s.Parameters = map[string]string{}
		}
		s.Parameters[k] = v.GetStringValue()
	}
	return s
}

// Versions picks the versions of onDisk that cfg's version_policy serves.
func Versions(cfg *kservepb.ModelConfig, onDisk []int64) ([]int64, error) {
	disk := slices.Sorted(slices.Values(onDisk))
	vp := cfg.GetVersionPolicy()
	switch {
	case vp.GetAll() != nil:
		return disk, nil
	case vp.GetSpecific() != nil:
		var out []int64
		for _, v := range vp.GetSpecific().Versions {
			if !slices.Contains(disk, v) {
				return nil, fmt.Errorf("version_policy specific: version %d is not in the model directory (it has %v)", v, disk)
			}
			out = append(out, v)
		}
		slices.Sort(out)
		return slices.Compact(out), nil
	}
	n := max(int(vp.GetLatest().GetNumVersions()), 1)
	return disk[max(len(disk)-n, 0):], nil
}
