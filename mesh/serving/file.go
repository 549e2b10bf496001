package serving

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strings"

	"github.com/cluster-serving/cluster-serving/telemetry"
	yaml "go.yaml.in/yaml/v3"
)

// File is config.yaml. The keys of SPEC §4 keep the original's names; the
// ones the original never had (NATS, batching, queue limits, logs) are ours.
// Every key is documented in Template, which `cluster-serving init` writes;
// a test keeps the two in step.
//
// A zero value means the default of the package that uses the setting
// (infer, mesh, embedded, the doors, telemetry); ParseFile fills only what
// the file's own semantics derive (jobName, model versions, the split of
// coreNumberPerMachine into sessions and threads). The methods of File map
// it onto those packages' Configs; cmd maps the door keys.
type File struct {
	// SPEC §4 keys.
	ModelPath                     string `yaml:"modelPath"`
	JobName                       string `yaml:"jobName"`
	PostProcessing                string `yaml:"postProcessing"`
	ImageResize                   string `yaml:"imageResize"`
	InputAlreadyBatched           bool   `yaml:"inputAlreadyBatched"`
	CoreNumberPerMachine          int    `yaml:"coreNumberPerMachine"`
	ModelParallelism              int    `yaml:"modelParallelism"`
	ThreadPerModel                int    `yaml:"threadPerModel"`
	RedisURL                      string `yaml:"redisUrl"`
	RedisMaxmemory                string `yaml:"redisMaxmemory"`
	RedisTimeout                  int    `yaml:"redisTimeout"`
	RedisSecureEnabled            bool   `yaml:"redisSecureEnabled"`
	RedisSecureTrustStorePath     string `yaml:"redisSecureTrustStorePath"`
	RedisSecureTrustStorePassword string `yaml:"redisSecureTrustStorePassword"`
	ModelEncrypted                bool   `yaml:"modelEncrypted"`
	RecordEncrypted               bool   `yaml:"recordEncrypted"`

	// Ours.
	OnnxruntimeLib  string `yaml:"onnxruntimeLib"`
	NatsURL         string `yaml:"natsUrl"`
	NatsCredentials string `yaml:"natsCredentials"`
	NatsListen      string `yaml:"natsListen"`
	NatsStoreDir    string `yaml:"natsStoreDir"`
	NatsMaxPayload  int    `yaml:"natsMaxPayload"`
	NatsSync        string `yaml:"natsSync"`
	QueueStorage    string `yaml:"queueStorage"`
	QueueReplicas   int    `yaml:"queueReplicas"`
	Partitions      int    `yaml:"jetstreamPartitions"`
	QueueMaxMsgs    int64  `yaml:"queueMaxMsgs"`
	QueueMaxBytes   int64  `yaml:"queueMaxBytes"`
	AckWait         int    `yaml:"ackWait"`
	MaxDeliver      int    `yaml:"maxDeliver"`
	ResultTTL       int    `yaml:"resultTTL"`
	MaxBatch        int    `yaml:"maxBatch"`
	MaxWait         int    `yaml:"maxWait"`
	WorkerInflight  int    `yaml:"workerInflight"`
	Coalesce        int    `yaml:"coalesce"`
	ShutdownGrace   int    `yaml:"shutdownGrace"`
	LogFormat       string `yaml:"logFormat"`
	LogLevel        string `yaml:"logLevel"`

	// Execution provider and batching of the model (per model too: the
	// models entries' keys of the same names win).
	ExecutionProvider string `yaml:"executionProvider"`
	Batching          string `yaml:"batching"`
	// ThreadSpinning: ONNX Runtime's intra-op threads spin-wait between
	// parallel sections (infer.Config.ThreadSpinning). Default false.
	ThreadSpinning bool `yaml:"threadSpinning"`

	// Several models (see file_models.go); exclusive with modelPath.
	Models []ModelEntry `yaml:"models"`

	// Response cache (Triton's response_cache, mesh.Cache): whether the
	// models without a config.pbtxt enable it (a models entry's key of
	// the same name wins), and the bounds of the mesh's bucket, in bytes
	// and seconds; 0 means mesh's defaults (256 MiB, 600 s).
	ResponseCache         bool  `yaml:"responseCache"`
	ResponseCacheMaxBytes int64 `yaml:"responseCacheMaxBytes"`
	ResponseCacheTTL      int   `yaml:"responseCacheTTL"`

	// DynamicBatching is the queue settings of the models without a
	// config.pbtxt, in config.pbtxt's text format of dynamic_batching
	// (priority_levels, default_priority_level, default_queue_policy,
	// priority_queue_policy; the other fields are the batching keys'):
	// the same meaning as Triton's. Empty: none.
	DynamicBatching string `yaml:"dynamicBatching"`

	// Model repository (see file_repository.go); exclusive with modelPath
	// and models.
	ModelRepository     string `yaml:"modelRepository"`
	ModelRepositoryPoll int    `yaml:"modelRepositoryPoll"`
	ModelControl        string `yaml:"modelControl"`
	// ServeModels names the repository's models this process runs
	// workers for; empty: all. The others are read for their description
	// only (an ensemble needs its steps'), so that each step of a
	// pipeline scales on processes of its own.
	ServeModels []string `yaml:"serveModels"`

	// HTTP door (SPEC §3 start options). timeWindow and countWindow are the
	// original's names of maxWait and maxBatch: aliases folded into those
	// two fields by resolveAliases, so the batching window has one source
	// of truth.
	HTTPInterface       string  `yaml:"httpInterface"`
	HTTPPort            int     `yaml:"httpPort"`
	HTTPRequestTimeout  int     `yaml:"httpRequestTimeout"`
	HTTPMaxBodyBytes    int64   `yaml:"httpMaxBodyBytes"`
	TimeWindow          int     `yaml:"timeWindow"`
	CountWindow         int     `yaml:"countWindow"`
	TokenBucketEnabled  bool    `yaml:"tokenBucketEnabled"`
	TokensPerSecond     float64 `yaml:"tokensPerSecond"`
	TokenAcquireTimeout int     `yaml:"tokenAcquireTimeout"`

	// gRPC door: the Open Inference Protocol (KServe v2) gRPC service on
	// httpInterface:grpcPort; 0 (the default) means none. It shares the
	// HTTP door's TLS, token file, httpRequestTimeout and httpMaxBodyBytes.
	GRPCPort int `yaml:"grpcPort"`

	// RESP door (bridge/respdoor): Redis clients with no Redis server, on
	// respListen (host:port; "" the default: none). Durations: respResultTTL
	// in seconds, respIdleTimeout in ms; 0 means the door's default.
	RESPListen         string `yaml:"respListen"`
	RESPUser           string `yaml:"respUser"`
	RESPPasswordFile   string `yaml:"respPasswordFile"`
	RESPTLSCert        string `yaml:"respTlsCert"`
	RESPTLSKey         string `yaml:"respTlsKey"`
	RESPTLSClientCA    string `yaml:"respTlsClientCa"`
	RESPResultTTL      int    `yaml:"respResultTTL"`
	RESPIdleTimeout    int    `yaml:"respIdleTimeout"`
	RESPMaxConnections int    `yaml:"respMaxConnections"`
	// respNotifyKeyspaceEvents: the keyspace notifications the RESP door
	// starts with (CONFIG SET notify-keyspace-events' letters; "": none).
	RESPNotifyKeyspaceEvents string `yaml:"respNotifyKeyspaceEvents"`

	// Connection bounds of the HTTP and gRPC doors (ms; a count): 0
	// means the door's default (bridge/door.Conns).
	HTTPIdleTimeout    int `yaml:"httpIdleTimeout"`
	HTTPReadTimeout    int `yaml:"httpReadTimeout"`
	HTTPWriteTimeout   int `yaml:"httpWriteTimeout"`
	HTTPMaxConnections int `yaml:"httpMaxConnections"`

	// Image pre-processing beyond the original's default (SPEC §7).
	ImageLayout   string  `yaml:"imageLayout"`
	ImageChannels string  `yaml:"imageChannels"`
	ImageScale    float64 `yaml:"imageScale"`
	ImageMean     string  `yaml:"imageMean"`
	ImageStd      string  `yaml:"imageStd"`
	// Image budget (infer.Config.ImageMaxPixels, ImageDecodeConcurrency,
	// ImageMemoryBudget): 0 means infer's default.
	ImageMaxPixels         int   `yaml:"imageMaxPixels"`
	ImageDecodeConcurrency int   `yaml:"imageDecodeConcurrency"`
	ImageMemoryBudget      int64 `yaml:"imageMemoryBudget"`

	// Telemetry.
	TracesExporter   string  `yaml:"tracesExporter"`
	OtlpEndpoint     string  `yaml:"otlpEndpoint"`
	OtlpInsecure     bool    `yaml:"otlpInsecure"`
	TraceSampleRatio float64 `yaml:"traceSampleRatio"`
	MetricsListen    string  `yaml:"metricsListen"`

	// Trace detail (docs/operate.md "Telemetry"): request (default) or stages.
	TraceDetail string `yaml:"traceDetail"`

	// Security (docs/security.md). Each names a file; no secret itself
	// is ever a key (passwords in natsUrl and redisUrl aside, which the
	// logs, banners and errors redact).
	HTTPTLSCert        string `yaml:"httpTlsCert"`
	HTTPTLSKey         string `yaml:"httpTlsKey"`
	HTTPTLSClientCA    string `yaml:"httpTlsClientCa"`
	HTTPAuthTokenFile  string `yaml:"httpAuthTokenFile"`
	NatsServerConfig   string `yaml:"natsServerConfig"`
	NatsAllowAnonymous bool   `yaml:"natsAllowAnonymous"`
	NatsTLSCA          string `yaml:"natsTlsCa"`
	NatsTLSCert        string `yaml:"natsTlsCert"`
	NatsTLSKey         string `yaml:"natsTlsKey"`
	NatsInboxPrefix    string `yaml:"natsInboxPrefix"`
	RedisTLSCert       string `yaml:"redisTlsCert"`
	RedisTLSKey        string `yaml:"redisTlsKey"`
}

// LogValue redacts secrets when the effective config is logged: password
// keys show as REDACTED, and the passwords inside natsUrl, redisUrl and
// otlpEndpoint as xxxxx (RedactURL).
func (f File) LogValue() slog.Value {
	v := reflect.ValueOf(f)
	t := v.Type()
	attrs := make([]slog.Attr, 0, t.NumField())
	for i := range t.NumField() {
		key := t.Field(i).Tag.Get("yaml")
		val := v.Field(i).Interface()
		if s, ok := val.(string); ok && s != "" {
			switch {
			case strings.Contains(strings.ToLower(key), "password"):
				val = "REDACTED"
			case strings.HasSuffix(key, "Url") || strings.HasSuffix(key, "Endpoint"):
				val = telemetry.RedactURL(s)
			}
		}
		attrs = append(attrs, slog.Any(key, val))
	}
	return slog.GroupValue(attrs...)
}

// fileKeys maps each yaml key to its field index.
var fileKeys = func() map[string]int {
	m := map[string]int{}
	t := reflect.TypeFor[File]()
	for i := range t.NumField() {
		m[t.Field(i).Tag.Get("yaml")] = i
	}
	return m
}()

// ParseFile reads config.yaml. Keys are decoded one by one so that an
// unknown key or a malformed value is reported with its name and line;
// then aliases are folded, derived values filled and every value checked.
// Each error names its key; several are joined.
func ParseFile(data []byte) (*File, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil && err.Error() != "EOF" {
		return nil, fmt.Errorf("config: %w", err)
	}
	f := &File{}
	if len(root.Content) > 0 {
		if err := f.decode(root.Content[0]); err != nil {
			return nil, err
		}
	}
	if err := f.resolveAliases(); err != nil {
		return nil, err
	}
	f.derive()
	if err := f.validate(); err != nil {
		return nil, err
	}
	return f, nil
}

// decode sets the fields of the keys in doc, a mapping.
func (f *File) decode(doc *yaml.Node) error {
	if doc.Kind != yaml.MappingNode {
		if doc.Kind == yaml.ScalarNode && doc.Tag == "!!null" {
			return nil
		}
		return fmt.Errorf("config: line %d: want a mapping of key: value", doc.Line)
	}
	v := reflect.ValueOf(f).Elem()
	var errs []error
	seen := map[string]bool{}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		k, val := doc.Content[i], doc.Content[i+1]
		idx, ok := fileKeys[k.Value]
		if !ok {
			errs = append(errs, fmt.Errorf("config key %q (line %d): unknown key%s", k.Value, k.Line, suggest(k.Value)))
			continue
		}
		if seen[k.Value] {
			errs = append(errs, fmt.Errorf("config key %q (line %d): given twice", k.Value, k.Line))
			continue
		}
		seen[k.Value] = true
		if val.Tag == "!!null" {
			continue
		}
		if err := val.Decode(v.Field(idx).Addr().Interface()); err != nil {
			var me *modelsError
			if errors.As(err, &me) {
				errs = append(errs, me)
				continue
			}
			errs = append(errs, fmt.Errorf("config key %q (line %d): want %s, got %q", k.Value, val.Line, v.Field(idx).Kind(), val.Value))
		}
	}
	return errors.Join(errs...)
}

// suggest names a known key that differs only in case, the commonest slip.
func suggest(key string) string {
	for k := range fileKeys {
		if strings.EqualFold(k, key) {
			return fmt.Sprintf(" (did you mean %q?)", k)
		}
	}
	return ""
}

// LoadFile reads and parses the config file at path. Its errors name the
// file, or say how to write one when it cannot be read.
func LoadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w (write one with `cluster-serving init`)", err)
	}
	f, err := ParseFile(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}
