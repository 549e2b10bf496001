package serving

import (
	"cmp"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// Defaults that belong to config.yaml itself rather than to a package.
const (
	// DefaultStoreDir is the embedded server's JetStream store when
	// natsStoreDir is empty. A configured server keeps its queue across
	// restarts, so this is a directory beside the config, not the
	// temporary one of embedded.Config's zero value.
	DefaultStoreDir = "data/jetstream"
	// MetricsOff is the metricsListen value that serves no metrics.
	MetricsOff = "off"
	// DefaultTokensPerSecond and DefaultTokenAcquireTimeout apply when
	// tokenBucketEnabled is true and the keys are 0. The HTTP door has no
	// defaults for them: there zero means no token bucket.
	DefaultTokensPerSecond     = 100
	DefaultTokenAcquireTimeout = 100 * time.Millisecond
)

func millis(v int) time.Duration { return time.Duration(v) * time.Millisecond }

// Node maps the file onto a Node's Config: NATS, the served models, the
// engine, stream and worker keys, and ONNX Runtime (getenv looks up
// $ONNXRUNTIME_LIB and the NATS_* variables of NATSAuth). The caller
// sets what depends on the command: Serve, Describe, Service, Name,
// Version, Logger and Metrics.
func (f *File) Node(getenv func(string) string) Config {
	return Config{
		URL:      f.NatsURL,
		Auth:     f.NATSAuth(getenv),
		Embedded: f.Embedded(),
		Models:   f.ServedModels(),
		// Model repository (file_repository.go).
		Repository: f.Repository(),
		Unit: UnitConfig{
			Engine:        f.Engine(),
			Stream:        f.Stream(),
			MaxInflight:   f.WorkerInflight,
			ShutdownGrace: f.Grace(),
		},
		Library:    f.OnnxruntimeLib,
		LibraryEnv: getenv("ONNXRUNTIME_LIB"),
		Coalesce:   f.Coalesce,
	}
}

// Engine maps the model keys onto infer.Config, without ModelPath (each
// model's path) and Hooks.
func (f *File) Engine() infer.Config {
	var resize [2]int
	if f.ImageResize != "" {
		resize[0], resize[1], _ = parseResize(f.ImageResize) // validated with the file
	}
	mean, _ := parseTriple(f.ImageMean)
	std, _ := parseTriple(f.ImageStd)
	return infer.Config{
		Parallelism:         f.ModelParallelism,
		Threads:             f.ThreadPerModel,
		MaxBatch:            f.MaxBatch,
		MaxWait:             millis(f.MaxWait),
		PostProcessing:      f.PostProcessing,
		InputAlreadyBatched: f.InputAlreadyBatched,
		ImageResize:         resize,
		ImageLayout:         f.ImageLayout,
		ImageChannels:       f.ImageChannels,
		ImageScale:          float32(f.ImageScale),
		ImageMean:           mean,
		ImageStd:            std,
		ExecutionProvider:   f.ExecutionProvider,
		Batching:            f.Batching,
		ThreadSpinning:      f.ThreadSpinning,

		ImageMaxPixels:         f.ImageMaxPixels,
		ImageDecodeConcurrency: f.ImageDecodeConcurrency,
		ImageMemoryBudget:      f.ImageMemoryBudget,
	}
}

// Stream maps the queue keys onto mesh.StreamConfig, without Job.
func (f *File) Stream() mesh.StreamConfig {
	storage := jetstream.FileStorage
	if f.QueueStorage == "memory" {
		storage = jetstream.MemoryStorage
	}
	return mesh.StreamConfig{
		Replicas:   f.QueueReplicas,
		Partitions: f.Partitions,
		Storage:    storage,
		MaxMsgs:    f.QueueMaxMsgs,
		MaxBytes:   f.QueueMaxBytes,
		AckWait:    millis(f.AckWait),
		MaxDeliver: f.MaxDeliver,
		ResultTTL:  time.Duration(f.ResultTTL) * time.Second,
	}
}

// CacheConfig maps responseCacheMaxBytes and responseCacheTTL onto the
// response cache's Config (mesh's defaults for zeros): what a door's
// cache makes the bucket with (see Node.ResponseCache).
func (f *File) CacheConfig() mesh.CacheConfig {
	return mesh.CacheConfig{MaxBytes: f.ResponseCacheMaxBytes, TTL: time.Duration(f.ResponseCacheTTL) * time.Second}
}

// Embedded maps natsListen, natsStoreDir, natsMaxPayload, natsSync,
// natsServerConfig and natsAllowAnonymous onto the embedded server's
// Config (see embedded's options for how the nats-server file and the
// keys combine: natsListen wins, the file's store_dir and max_payload win).
func (f *File) Embedded() embedded.Config {
	c := embedded.Config{
		StoreDir:       cmp.Or(f.NatsStoreDir, filepath.FromSlash(DefaultStoreDir)),
		MaxPayload:     int32(f.NatsMaxPayload),
		ConfigFile:     f.NatsServerConfig,
		AllowAnonymous: f.NatsAllowAnonymous,
		Sync:           f.NatsSync,
	}
	if f.NatsListen != "" {
		c.Host, c.Port, _ = splitHostPort(f.NatsListen) // validated with the file
	}
	return c
}

// NATSAuth is how every NATS client of the job authenticates and names
// its inboxes: natsCredentials, natsTls* and natsInboxPrefix, and the
// user, password or token getenv finds in $NATS_USER, $NATS_PASSWORD and
// $NATS_TOKEN (the nats CLI's variables; secrets are never keys). getenv may be nil: no variables.
func (f *File) NATSAuth(getenv func(string) string) NATSAuth {
	a := NATSAuth{Credentials: f.NatsCredentials, TLSCA: f.NatsTLSCA, TLSCert: f.NatsTLSCert, TLSKey: f.NatsTLSKey,
		InboxPrefix: f.NatsInboxPrefix}
	if getenv != nil {
		a.User, a.Password, a.Token = getenv(EnvNATSUser), getenv(EnvNATSPassword), getenv(EnvNATSToken)
	}
	return a
}

// NATSURL is where a client of the job connects: natsUrl, else the
// embedded server's listen address.
func (f *File) NATSURL() string {
	if f.NatsURL != "" {
		return f.NatsURL
	}
	c := f.Embedded()
	return "nats://" + net.JoinHostPort(cmp.Or(c.Host, embedded.DefaultHost), strconv.Itoa(cmp.Or(c.Port, embedded.DefaultPort)))
}

// Grace is shutdownGrace; zero means each package's default.
func (f *File) Grace() time.Duration { return time.Duration(f.ShutdownGrace) * time.Second }

// TokenBucket is the HTTP door's rate limit: zeros when tokenBucketEnabled
// is false, else tokensPerSecond and tokenAcquireTimeout with their
// defaults.
func (f *File) TokenBucket() (perSecond float64, acquire time.Duration) {
	if !f.TokenBucketEnabled {
		return 0, 0
	}
	return cmp.Or(f.TokensPerSecond, DefaultTokensPerSecond), cmp.Or(millis(f.TokenAcquireTimeout), DefaultTokenAcquireTimeout)
}

// MetricsAddr is where Prometheus metrics are served: "" when
// metricsListen is off, else the key or telemetry's default.
func (f *File) MetricsAddr() string {
	if f.MetricsListen == MetricsOff {
		return ""
	}
	return cmp.Or(f.MetricsListen, telemetry.DefaultMetricsListen)
}

// Telemetry maps the telemetry and log keys, and the standard OTEL_*
// variables that getenv looks up, onto telemetry.Config; the caller sets
// ServiceVersion and Output. Keys win: OTEL_TRACES_EXPORTER=otlp (with
// OTEL_EXPORTER_OTLP_PROTOCOL) and OTEL_TRACES_SAMPLER_ARG apply when the
// keys are left at their defaults. The OTLP exporters read the other
// OTEL_EXPORTER_OTLP_* variables themselves.
func (f *File) Telemetry(getenv func(string) string) telemetry.Config {
	exporter := f.TracesExporter
	if (exporter == "" || exporter == telemetry.ExporterNone) && getenv("OTEL_TRACES_EXPORTER") == "otlp" {
		exporter = telemetry.ExporterOTLPGRPC
		if strings.HasPrefix(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "http") {
			exporter = telemetry.ExporterOTLPHTTP
		}
	}
	ratio := f.TraceSampleRatio
	if ratio == 0 {
		if r, err := strconv.ParseFloat(getenv("OTEL_TRACES_SAMPLER_ARG"), 64); err == nil && r > 0 && r <= 1 {
			ratio = r
		}
	}
	return telemetry.Config{
		ServiceName:    getenv("OTEL_SERVICE_NAME"),
		TracesExporter: exporter,
		OTLPEndpoint:   f.OtlpEndpoint,
		OTLPInsecure:   f.OtlpInsecure,
		SampleRatio:    ratio,
		TraceDetail:    f.TraceDetail,
		MetricsEnabled: f.MetricsListen != MetricsOff,
		LogFormat:      f.LogFormat,
		LogLevel:       f.LogLevel,
	}
}
