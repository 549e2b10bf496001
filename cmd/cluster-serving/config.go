package main

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// Config is config.yaml. The keys of SPEC §4 keep the original's names; the
// ones the original never had (NATS, batching, queue limits, logs) are ours.
// Every key is documented in configTemplate, which `cluster-serving init`
// writes; a test keeps the two in step.
type Config struct {
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
	QueueStorage    string `yaml:"queueStorage"`
	QueueReplicas   int    `yaml:"queueReplicas"`
	QueueMaxMsgs    int64  `yaml:"queueMaxMsgs"`
	QueueMaxBytes   int64  `yaml:"queueMaxBytes"`
	AckWait         int    `yaml:"ackWait"`
	MaxDeliver      int    `yaml:"maxDeliver"`
	ResultTTL       int    `yaml:"resultTTL"`
	MaxBatch        int    `yaml:"maxBatch"`
	MaxWait         int    `yaml:"maxWait"`
	WorkerInflight  int    `yaml:"workerInflight"`
	ShutdownGrace   int    `yaml:"shutdownGrace"`
	LogFormat       string `yaml:"logFormat"`
	LogLevel        string `yaml:"logLevel"`

	// Several models (see models.go); exclusive with modelPath.
	Models []ModelEntry `yaml:"models"`

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

	// Image pre-processing beyond the original's default (SPEC §7).
	ImageLayout   string  `yaml:"imageLayout"`
	ImageChannels string  `yaml:"imageChannels"`
	ImageScale    float64 `yaml:"imageScale"`
	ImageMean     string  `yaml:"imageMean"`
	ImageStd      string  `yaml:"imageStd"`

	// Telemetry (telemetry.go).
	TracesExporter   string  `yaml:"tracesExporter"`
	OtlpEndpoint     string  `yaml:"otlpEndpoint"`
	OtlpInsecure     bool    `yaml:"otlpInsecure"`
	TraceSampleRatio float64 `yaml:"traceSampleRatio"`
	MetricsListen    string  `yaml:"metricsListen"`
}

const defaultJob = "serving_stream"

// defaults fills the zero values. It runs after parsing, so a key that is
// present with its zero value means "default" too, as in the original.
func (c *Config) defaults() {
	if c.JobName == "" {
		c.JobName = defaultJob
	}
	if c.RedisTimeout == 0 {
		c.RedisTimeout = 5000
	}
	if c.NatsListen == "" {
		c.NatsListen = "127.0.0.1:4222"
	}
	if c.NatsMaxPayload == 0 {
		c.NatsMaxPayload = 8 << 20
	}
	if c.QueueStorage == "" {
		c.QueueStorage = "file"
	}
	if c.QueueReplicas == 0 {
		c.QueueReplicas = 1
	}
	if c.AckWait == 0 {
		c.AckWait = 30000
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = 5
	}
	if c.ResultTTL == 0 {
		c.ResultTTL = 600
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 16
	}
	if c.WorkerInflight == 0 {
		c.WorkerInflight = 64
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = 30
	}
	if c.LogFormat == "" {
		c.LogFormat = "text"
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	if c.TracesExporter == "" {
		c.TracesExporter = "none"
	}
	if c.MetricsListen == "" {
		c.MetricsListen = "127.0.0.1:9464"
	}
	if c.HTTPInterface == "" {
		c.HTTPInterface = "0.0.0.0"
	}
	if c.HTTPPort == 0 {
		c.HTTPPort = 10020
	}
	if c.HTTPRequestTimeout == 0 {
		c.HTTPRequestTimeout = 30000
	}
	if c.HTTPMaxBodyBytes == 0 {
		c.HTTPMaxBodyBytes = 16 << 20
	}
	if c.TokensPerSecond == 0 {
		c.TokensPerSecond = 100
	}
	if c.TokenAcquireTimeout == 0 {
		c.TokenAcquireTimeout = 100
	}
	for i := range c.Models {
		if c.Models[i].Version == "" {
			c.Models[i].Version = "1"
		}
	}
	// coreNumberPerMachine derives the other two when they are not set:
	// modelParallelism sessions × threadPerModel threads = the cores given.
	cores := c.CoreNumberPerMachine
	if cores <= 0 {
		cores = runtime.NumCPU()
	}
	if c.ModelParallelism == 0 {
		c.ModelParallelism = 1
	}
	if c.ThreadPerModel == 0 {
		c.ThreadPerModel = max(1, cores/c.ModelParallelism)
	}
}

var jobNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// validate checks values; each error names its key.
func (c *Config) validate() error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("config key %q: %s", key, fmt.Sprintf(format, a...)))
	}
	switch {
	case c.ModelPath == "" && len(c.Models) == 0:
		bad("modelPath", "required: a directory holding exactly one .onnx model (or list several under \"models\")")
	case c.ModelPath != "" && len(c.Models) > 0:
		bad("models", "set modelPath (one model) or models (several), not both")
	}
	errs = append(errs, validateModels(c.Models)...)
	if c.ImageLayout != "" && c.ImageLayout != "CHW" && c.ImageLayout != "HWC" {
		bad("imageLayout", "%q is not CHW or HWC", c.ImageLayout)
	}
	if c.ImageChannels != "" && c.ImageChannels != "BGR" && c.ImageChannels != "RGB" {
		bad("imageChannels", "%q is not BGR or RGB", c.ImageChannels)
	}
	for key, v := range map[string]string{"imageMean": c.ImageMean, "imageStd": c.ImageStd} {
		if _, err := parseTriple(v); err != nil {
			bad(key, "%v", err)
		}
	}
	switch c.TracesExporter {
	case "", "none", "otlp-grpc", "otlp-http":
	default:
		bad("tracesExporter", "%q is not none, otlp-grpc or otlp-http", c.TracesExporter)
	}
	if c.TraceSampleRatio < 0 || c.TraceSampleRatio > 1 {
		bad("traceSampleRatio", "%v is not within [0, 1]", c.TraceSampleRatio)
	}
	if c.MetricsListen != "" && c.MetricsListen != "off" {
		if _, _, err := splitHostPort(c.MetricsListen); err != nil {
			bad("metricsListen", "%q is not host:port or off", c.MetricsListen)
		}
	}
	if c.HTTPPort < -1 || c.HTTPPort > 65535 {
		bad("httpPort", "%d: want 1 to 65535, or -1 for no HTTP door", c.HTTPPort)
	}
	if c.HTTPMaxBodyBytes < 0 {
		bad("httpMaxBodyBytes", "%d is negative", c.HTTPMaxBodyBytes)
	}
	if c.TokensPerSecond < 0 {
		bad("tokensPerSecond", "%v is negative", c.TokensPerSecond)
	}
	if !jobNameRE.MatchString(c.JobName) {
		bad("jobName", "%q may hold only letters, digits, '_' and '-' (it names a NATS subject and stream)", c.JobName)
	}
	if c.PostProcessing != "" && !postProcessingRE.MatchString(c.PostProcessing) {
		bad("postProcessing", "%q is not topN(n) or pickTopN(n)", c.PostProcessing)
	}
	if c.ImageResize != "" {
		if _, _, err := parseResize(c.ImageResize); err != nil {
			bad("imageResize", "%v", err)
		}
	}
	for key, v := range map[string]int{"coreNumberPerMachine": c.CoreNumberPerMachine, "modelParallelism": c.ModelParallelism,
		"threadPerModel": c.ThreadPerModel, "maxBatch": c.MaxBatch, "maxWait": c.MaxWait, "redisTimeout": c.RedisTimeout,
		"ackWait": c.AckWait, "maxDeliver": c.MaxDeliver, "resultTTL": c.ResultTTL, "workerInflight": c.WorkerInflight,
		"shutdownGrace": c.ShutdownGrace, "queueReplicas": c.QueueReplicas, "natsMaxPayload": c.NatsMaxPayload,
		"httpRequestTimeout": c.HTTPRequestTimeout, "tokenAcquireTimeout": c.TokenAcquireTimeout,
		"timeWindow": c.TimeWindow, "countWindow": c.CountWindow} {
		if v < 0 {
			bad(key, "%d is negative", v)
		}
	}
	if c.QueueReplicas > 5 {
		bad("queueReplicas", "%d: JetStream allows 1 to 5", c.QueueReplicas)
	}
	if c.QueueStorage != "file" && c.QueueStorage != "memory" {
		bad("queueStorage", "%q is not file or memory", c.QueueStorage)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("logFormat", "%q is not text or json", c.LogFormat)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.LogLevel)); err != nil {
		bad("logLevel", "%q is not debug, info, warn or error", c.LogLevel)
	}
	if c.ModelEncrypted {
		bad("modelEncrypted", "encrypted models are not supported: decrypt the model before serving it")
	}
	if c.RecordEncrypted {
		bad("recordEncrypted", "encrypted records are not supported yet")
	}
	if c.RedisSecureEnabled && c.RedisSecureTrustStorePath == "" {
		bad("redisSecureTrustStorePath", "required when redisSecureEnabled is true (a PEM CA file)")
	}
	return errors.Join(errs...)
}

var postProcessingRE = regexp.MustCompile(`^(topN|pickTopN)\(\s*[1-9][0-9]*\s*\)$`)

func parseResize(s string) (h, w int, err error) {
	parts := strings.Split(s, ",")
	if len(parts) != 2 {
		return 0, 0, fmt.Errorf("%q is not \"height,width\"", s)
	}
	h, err1 := strconv.Atoi(strings.TrimSpace(parts[0]))
	w, err2 := strconv.Atoi(strings.TrimSpace(parts[1]))
	if err1 != nil || err2 != nil || h <= 0 || w <= 0 {
		return 0, 0, fmt.Errorf("%q is not two positive integers \"height,width\"", s)
	}
	return h, w, nil
}

func (c *Config) maxWait() time.Duration { return time.Duration(c.MaxWait) * time.Millisecond }
func (c *Config) ackWait() time.Duration { return time.Duration(c.AckWait) * time.Millisecond }
func (c *Config) grace() time.Duration   { return time.Duration(c.ShutdownGrace) * time.Second }

// resolveAliases folds timeWindow into maxWait and countWindow into
// maxBatch; giving both names of one setting with different values is an
// error naming them.
func (c *Config) resolveAliases() error {
	var errs []error
	fold := func(alias string, av int, key string, kv *int) {
		switch {
		case av == 0:
		case *kv != 0 && *kv != av:
			errs = append(errs, fmt.Errorf("config key %q: %d conflicts with %s: %d (%s is the original's name of %s; set one)", alias, av, key, *kv, alias, key))
		default:
			*kv = av
		}
	}
	fold("timeWindow", c.TimeWindow, "maxWait", &c.MaxWait)
	fold("countWindow", c.CountWindow, "maxBatch", &c.MaxBatch)
	c.TimeWindow, c.CountWindow = 0, 0
	return errors.Join(errs...)
}

// LogValue redacts secrets when the effective config is logged.
func (c Config) LogValue() slog.Value {
	v := reflect.ValueOf(c)
	t := v.Type()
	attrs := make([]slog.Attr, 0, t.NumField())
	for i := range t.NumField() {
		key := t.Field(i).Tag.Get("yaml")
		val := v.Field(i).Interface()
		if strings.Contains(strings.ToLower(key), "password") || strings.Contains(strings.ToLower(key), "credentials") {
			if s, _ := val.(string); s != "" {
				val = "REDACTED"
			}
		}
		attrs = append(attrs, slog.Any(key, val))
	}
	return slog.GroupValue(attrs...)
}

// configKeys maps each yaml key to its field index.
var configKeys = func() map[string]int {
	m := map[string]int{}
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		m[t.Field(i).Tag.Get("yaml")] = i
	}
	return m
}()

// parseConfig reads config.yaml. Keys are decoded one by one so that an
// unknown key or a malformed value is reported with its name and line.
func parseConfig(data []byte) (*Config, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil && err.Error() != "EOF" {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg := &Config{}
	if len(root.Content) > 0 {
		doc := root.Content[0]
		if doc.Kind != yaml.MappingNode {
			if doc.Kind == yaml.ScalarNode && doc.Tag == "!!null" {
				doc = &yaml.Node{Kind: yaml.MappingNode}
			} else {
				return nil, fmt.Errorf("config: line %d: want a mapping of key: value", doc.Line)
			}
		}
		v := reflect.ValueOf(cfg).Elem()
		var errs []error
		seen := map[string]bool{}
		for i := 0; i+1 < len(doc.Content); i += 2 {
			k, val := doc.Content[i], doc.Content[i+1]
			idx, ok := configKeys[k.Value]
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
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
	}
	if err := cfg.resolveAliases(); err != nil {
		return nil, err
	}
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// suggest names a known key that differs only in case, the commonest slip.
func suggest(key string) string {
	for k := range configKeys {
		if strings.EqualFold(k, key) {
			return fmt.Sprintf(" (did you mean %q?)", k)
		}
	}
	return ""
}

func loadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w (write one with `cluster-serving init`)", err)
	}
	cfg, err := parseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// parseTriple reads "a,b,c" (per-channel values); "" gives zeros.
func parseTriple(s string) ([3]float32, error) {
	var out [3]float32
	if s == "" {
		return out, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return out, fmt.Errorf("%q is not three numbers \"a,b,c\"", s)
	}
	for i, p := range parts {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 32)
		if err != nil {
			return out, fmt.Errorf("%q is not three numbers \"a,b,c\"", s)
		}
		out[i] = float32(f)
	}
	return out, nil
}
