package serving

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	yaml "go.yaml.in/yaml/v3"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// ModelEntry is one element of the config key models.
type ModelEntry struct {
	// Name names the model in URLs (/v2/models/<name>) and in its job.
	Name string `yaml:"name"`
	// Version is the model version, default "1".
	Version string `yaml:"version"`
	// Path is a directory holding exactly one .onnx model, or the file.
	Path string `yaml:"path"`
	// ExecutionProvider and Batching override the top-level keys of the
	// same names for this model; empty: those.
	ExecutionProvider string `yaml:"executionProvider"`
	Batching          string `yaml:"batching"`
	// ResponseCache overrides the top-level key of the same name for this
	// model; nil: that.
	ResponseCache *bool `yaml:"responseCache"`
}

// modelsError is a models entry's error; ParseFile reports it as it is.
type modelsError struct{ msg string }

func (e *modelsError) Error() string { return e.msg }

var modelEntryKeys = []string{"name", "version", "path", "executionProvider", "batching", "responseCache"}

// UnmarshalYAML decodes one entry, rejecting keys other than name, version
// and path by name.
func (m *ModelEntry) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return &modelsError{fmt.Sprintf("config key \"models\" (line %d): each entry is a mapping {name, version, path, executionProvider, batching, responseCache}", n.Line)}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !slices.Contains(modelEntryKeys, k.Value) {
			return &modelsError{fmt.Sprintf("config key \"models\" (line %d): unknown key %q in a model entry: want name, version, path, executionProvider, batching or responseCache", k.Line, k.Value)}
		}
		if v.Kind != yaml.ScalarNode {
			return &modelsError{fmt.Sprintf("config key \"models\" (line %d): %s: want a string", v.Line, k.Value)}
		}
		switch k.Value {
		case "name":
			m.Name = v.Value
		case "version":
			m.Version = v.Value
		case "path":
			m.Path = v.Value
		case "executionProvider":
			m.ExecutionProvider = v.Value
		case "batching":
			m.Batching = v.Value
		case "responseCache":
			on, err := strconv.ParseBool(v.Value)
			if err != nil {
				return &modelsError{fmt.Sprintf("config key \"models\" (line %d): responseCache: want true or false, got %q", v.Line, v.Value)}
			}
			m.ResponseCache = &on
		}
	}
	return nil
}

// validateModels checks the models entries (versions already defaulted).
func validateModels(models []ModelEntry) []error {
	var errs []error
	seen := map[string]bool{}
	for i, m := range models {
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("config key \"models\": entry %d: %s", i+1, fmt.Sprintf(format, a...)))
		}
		switch {
		case mesh.ValidateJob(m.Name) != nil:
			bad("name %q may hold only letters, digits, '_' and '-' (it names a URL path and a NATS subject)", m.Name)
		case mesh.ValidateJob(m.Version) != nil:
			bad("version %q may hold only letters, digits, '_' and '-'", m.Version)
		case m.Path == "":
			bad("path is required: a directory holding exactly one .onnx model")
		case seen[m.Name+"/"+m.Version]:
			bad("%s version %s is listed twice", m.Name, m.Version)
		case m.ExecutionProvider != "" && !slices.Contains(infer.Providers, m.ExecutionProvider):
			bad("executionProvider %q is not one of %s", m.ExecutionProvider, strings.Join(infer.Providers, ", "))
		case m.Batching != "" && !slices.Contains(infer.Batchings, m.Batching):
			bad("batching %q is not one of %s", m.Batching, strings.Join(infer.Batchings, ", "))
		}
		seen[m.Name+"/"+m.Version] = true
	}
	return errs
}

// Model is one model a process serves, with the job its requests go
// through.
type Model struct {
	// Name and Version identify the model (URLs, metrics, discovery).
	Name, Version string
	// Path is the model directory or .onnx file.
	Path string
	// Job is the mesh job whose workers serve the model.
	Job string
	// ExecutionProvider and Batching are the model's own settings (its
	// models entry); empty: the engine's (the top-level keys).
	ExecutionProvider, Batching string
	// Info describes the inputs and outputs: filled by a Unit once the
	// model is loaded, or by a Node that describes models; zero otherwise.
	Info infer.ModelInfo
	// Config is the model's Triton configuration, completed from the
	// graph (its config.pbtxt in a model repository; without one, as
	// Triton's auto-complete, with the engine's batch size as
	// max_batch_size): what the doors answer at /v2/models/{m}/config.
	// Filled with Info; nil otherwise.
	Config *kservepb.ModelConfig
	// ResponseCache enables the response cache for the model as a
	// config.pbtxt's response_cache { enable: true } does (config.yaml's
	// responseCache keys); see CacheEnabled.
	ResponseCache bool
	// Queue is config.yaml's dynamicBatching (the queue settings of a
	// model without a config.pbtxt); nil: none. See ServedConfig.
	Queue *kservepb.ModelDynamicBatching
}

// CacheEnabled reports whether the model's answers are kept in the
// response cache: its config.pbtxt's response_cache, or config.yaml's
// responseCache.
func (m Model) CacheEnabled() bool {
	return m.ResponseCache || m.Config.GetResponseCache().GetEnable()
}

// ServedConfig is Config as the doors and the worker act on it: with
// response_cache { enable: true } when config.yaml enables the cache of
// a model whose config.pbtxt does not, and with config.yaml's
// dynamicBatching queue settings (a copy; Config itself when nothing
// changes).
func (m Model) ServedConfig() *kservepb.ModelConfig {
	cache := m.ResponseCache && !m.Config.GetResponseCache().GetEnable()
	if m.Config == nil || (!cache && m.Queue == nil) {
		return m.Config
	}
	c := proto.Clone(m.Config).(*kservepb.ModelConfig)
	if cache {
		c.ResponseCache = &kservepb.ModelResponseCache{Enable: true}
	}
	if q := m.Queue; q != nil {
		db := c.GetDynamicBatching()
		if db == nil {
			db = &kservepb.ModelDynamicBatching{}
			c.SchedulingChoice = &kservepb.ModelConfig_DynamicBatching{DynamicBatching: db}
		}
		db.PriorityLevels, db.DefaultPriorityLevel = q.PriorityLevels, q.DefaultPriorityLevel
		db.DefaultQueuePolicy, db.PriorityQueuePolicy = q.DefaultQueuePolicy, q.PriorityQueuePolicy
	}
	return c
}

// QueueSettings is the model's queue settings as ServedConfig has them,
// read without copying the config: config.yaml's dynamicBatching, else
// its config's.
func (m Model) QueueSettings() modelconfig.Queue {
	if m.Queue != nil && m.Config != nil {
		return modelconfig.QueueOfBatching(m.Queue)
	}
	return modelconfig.QueueOf(m.Config)
}

// queue parses dynamicBatching; nil without one. Its errors say what
// Triton would of the same dynamic_batching.
func (f *File) queue() (*kservepb.ModelDynamicBatching, error) {
	if strings.TrimSpace(f.DynamicBatching) == "" {
		return nil, nil
	}
	db := &kservepb.ModelDynamicBatching{}
	if err := prototext.Unmarshal([]byte(f.DynamicBatching), db); err != nil {
		return nil, fmt.Errorf("not dynamic_batching in config.pbtxt's text format: %w", err)
	}
	if err := modelconfig.QueueOfBatching(db).Check(modelconfig.MaxPriorityLevels); err != nil {
		return nil, err
	}
	return db, nil
}

// ServedModels lists the configured models. The first is the default
// model: its job is jobName, so that /predict, the Redis door, "predict"
// and serving.<jobName>.predict reach it. With modelPath it is the only
// one, named jobName, version 1. Other entries of models get the job
// <jobName>-<name>-v<version>.
func (f *File) ServedModels() []Model {
	if f.ModelRepository != "" {
		return nil // the node's Repository finds them
	}
	queue, _ := f.queue() // checked by ParseFile
	if len(f.Models) == 0 {
		return []Model{{Name: f.JobName, Version: "1", Path: f.ModelPath, Job: f.JobName, ResponseCache: f.ResponseCache, Queue: queue}}
	}
	out := make([]Model, len(f.Models))
	for i, m := range f.Models {
		job := f.JobName
		if i > 0 {
			job = f.JobName + "-" + m.Name + "-v" + m.Version
		}
		out[i] = Model{Name: m.Name, Version: m.Version, Path: m.Path, Job: job, ExecutionProvider: m.ExecutionProvider, Batching: m.Batching,
			ResponseCache: f.ResponseCache, Queue: queue}
		if m.ResponseCache != nil {
			out[i].ResponseCache = *m.ResponseCache
		}
	}
	return out
}
