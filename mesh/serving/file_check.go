package serving

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// derive fills what the file's own semantics define, after parsing, so
// that a key present with its zero value means "default" too, as in the
// original. Every other zero stays zero: the package that uses the value
// applies its default.
func (f *File) derive() {
	if f.JobName == "" {
		f.JobName = mesh.DefaultJob
	}
	for i := range f.Models {
		if f.Models[i].Version == "" {
			f.Models[i].Version = "1"
		}
	}
	// coreNumberPerMachine derives the other two when they are not set:
	// modelParallelism sessions × threadPerModel threads = the cores given.
	cores := f.CoreNumberPerMachine
	if cores <= 0 {
		cores = runtime.NumCPU()
	}
	if f.ModelParallelism == 0 {
		f.ModelParallelism = infer.DefaultParallelism
	}
	if f.ThreadPerModel == 0 {
		f.ThreadPerModel = max(1, cores/f.ModelParallelism)
	}
}

// problems collects the errors of validate; each names its key.
type problems []error

func (p *problems) bad(key, format string, a ...any) {
	*p = append(*p, fmt.Errorf("config key %q: %s", key, fmt.Sprintf(format, a...)))
}

// validate checks values; each error names its key.
func (f *File) validate() error {
	var p problems
	switch {
	case f.ModelPath == "" && len(f.Models) == 0 && f.ModelRepository == "":
		p.bad("modelPath", "required: a directory holding exactly one .onnx model (or list several under \"models\", or set \"modelRepository\")")
	case f.ModelPath != "" && len(f.Models) > 0:
		p.bad("models", "set modelPath (one model) or models (several), not both")
	}
	p = append(p, validateModels(f.Models)...)
	if mesh.ValidateJob(f.JobName) != nil {
		p.bad("jobName", "%q may hold only letters, digits, '_' and '-' (it names a NATS subject and stream)", f.JobName)
	}
	f.validateModel(&p)
	f.validateRepository(&p)
	f.validateMesh(&p)
	f.validateDoors(&p)
	f.validateTelemetry(&p)
	f.validateSecurity(&p)
	f.validateRESP(&p)
	for key, v := range map[string]int{"coreNumberPerMachine": f.CoreNumberPerMachine, "modelParallelism": f.ModelParallelism,
		"threadPerModel": f.ThreadPerModel, "maxBatch": f.MaxBatch, "maxWait": f.MaxWait, "redisTimeout": f.RedisTimeout,
		"ackWait": f.AckWait, "maxDeliver": f.MaxDeliver, "resultTTL": f.ResultTTL, "workerInflight": f.WorkerInflight, "coalesce": f.Coalesce,
		"shutdownGrace": f.ShutdownGrace, "queueReplicas": f.QueueReplicas, "jetstreamPartitions": f.Partitions, "natsMaxPayload": f.NatsMaxPayload,
		"httpRequestTimeout": f.HTTPRequestTimeout, "tokenAcquireTimeout": f.TokenAcquireTimeout,
		"httpIdleTimeout": f.HTTPIdleTimeout, "httpReadTimeout": f.HTTPReadTimeout, "httpWriteTimeout": f.HTTPWriteTimeout, "httpMaxConnections": f.HTTPMaxConnections,
		"timeWindow": f.TimeWindow, "countWindow": f.CountWindow} {
		if v < 0 {
			p.bad(key, "%d is negative", v)
		}
	}
	return errors.Join(p...)
}

// validateModel checks the keys of the engine: pre- and post-processing.
func (f *File) validateModel(p *problems) {
	if f.ImageLayout != "" && f.ImageLayout != "CHW" && f.ImageLayout != "HWC" {
		p.bad("imageLayout", "%q is not CHW or HWC", f.ImageLayout)
	}
	if f.ImageChannels != "" && f.ImageChannels != "BGR" && f.ImageChannels != "RGB" {
		p.bad("imageChannels", "%q is not BGR or RGB", f.ImageChannels)
	}
	for key, v := range map[string]string{"imageMean": f.ImageMean, "imageStd": f.ImageStd} {
		if _, err := parseTriple(v); err != nil {
			p.bad(key, "%v", err)
		}
	}
	if _, err := infer.ParsePostProcessing(f.PostProcessing); err != nil {
		p.bad("postProcessing", "%q is not topN(n) or pickTopN(n)", f.PostProcessing)
	}
	if f.ExecutionProvider != "" && !slices.Contains(infer.Providers, f.ExecutionProvider) {
		p.bad("executionProvider", "%q is not one of %s", f.ExecutionProvider, strings.Join(infer.Providers, ", "))
	}
	if f.Batching != "" && !slices.Contains(infer.Batchings, f.Batching) {
		p.bad("batching", "%q is not one of %s", f.Batching, strings.Join(infer.Batchings, ", "))
	}
	if f.ImageResize != "" {
		if _, _, err := parseResize(f.ImageResize); err != nil {
			p.bad("imageResize", "%v", err)
		}
	}
	if f.ImageMaxPixels < 0 || f.ImageMaxPixels > infer.MaxImagePixels {
		p.bad("imageMaxPixels", "%d: want 1 to %d, or 0 for the default", f.ImageMaxPixels, infer.MaxImagePixels)
	}
	if f.ImageDecodeConcurrency < 0 {
		p.bad("imageDecodeConcurrency", "%d is negative", f.ImageDecodeConcurrency)
	}
	if f.ImageMemoryBudget < 0 {
		p.bad("imageMemoryBudget", "%d is negative", f.ImageMemoryBudget)
	}
}

// validateMesh checks the keys of NATS, the embedded server and the queues.
func (f *File) validateMesh(p *problems) {
	if f.NatsListen != "" {
		if _, _, err := splitHostPort(f.NatsListen); err != nil {
			p.bad("natsListen", "%v", err)
		}
	}
	if f.QueueReplicas > 5 {
		p.bad("queueReplicas", "%d: JetStream allows 1 to 5", f.QueueReplicas)
	}
	if f.Partitions > mesh.MaxPartitions {
		p.bad("jetstreamPartitions", "%d: at most %d", f.Partitions, mesh.MaxPartitions)
	}
	if f.QueueStorage != "" && f.QueueStorage != "file" && f.QueueStorage != "memory" {
		p.bad("queueStorage", "%q is not file or memory", f.QueueStorage)
	}
	if f.ResponseCacheMaxBytes < 0 {
		p.bad("responseCacheMaxBytes", "%d is negative", f.ResponseCacheMaxBytes)
	}
	if f.ResponseCacheTTL < 0 {
		p.bad("responseCacheTTL", "%d is negative", f.ResponseCacheTTL)
	}
	if _, err := f.queue(); err != nil {
		p.bad("dynamicBatching", "%v", err)
	}
}

// validateDoors checks the keys of the HTTP and Redis doors.
func (f *File) validateDoors(p *problems) {
	if f.HTTPPort < -1 || f.HTTPPort > 65535 {
		p.bad("httpPort", "%d: want 1 to 65535, or -1 for no HTTP door", f.HTTPPort)
	}
	if f.GRPCPort < 0 || f.GRPCPort > 65535 {
		p.bad("grpcPort", "%d: want 1 to 65535, or 0 for no gRPC door", f.GRPCPort)
	}
	if f.GRPCPort != 0 && f.GRPCPort == f.HTTPPort {
		p.bad("grpcPort", "%d is httpPort too: give the gRPC door its own port", f.GRPCPort)
	}
	if f.HTTPMaxBodyBytes < 0 {
		p.bad("httpMaxBodyBytes", "%d is negative", f.HTTPMaxBodyBytes)
	}
	if f.HTTPWriteTimeout > 0 && f.HTTPWriteTimeout <= cmp.Or(f.HTTPRequestTimeout, 30000) { // the doors' default 30s
		p.bad("httpWriteTimeout", "%d must be longer than httpRequestTimeout, or a slow inference is cut off", f.HTTPWriteTimeout)
	}
	if f.TokensPerSecond < 0 {
		p.bad("tokensPerSecond", "%v is negative", f.TokensPerSecond)
	}
	if f.RedisSecureEnabled && f.RedisSecureTrustStorePath == "" {
		p.bad("redisSecureTrustStorePath", "required when redisSecureEnabled is true (a PEM CA file or a PKCS#12 trust store)")
	}
}

// validateSecurity checks the TLS and authentication keys: a certificate
// goes with its key, and a client CA needs the door to serve TLS.
func (f *File) validateSecurity(p *problems) {
	pairs := []struct{ cert, key, certVal, keyVal string }{
		{"httpTlsCert", "httpTlsKey", f.HTTPTLSCert, f.HTTPTLSKey},
		{"natsTlsCert", "natsTlsKey", f.NatsTLSCert, f.NatsTLSKey},
		{"redisTlsCert", "redisTlsKey", f.RedisTLSCert, f.RedisTLSKey},
	}
	for _, pr := range pairs {
		switch {
		case pr.certVal != "" && pr.keyVal == "":
			p.bad(pr.key, "required when %s is set (the certificate's PEM private key)", pr.cert)
		case pr.certVal == "" && pr.keyVal != "":
			p.bad(pr.cert, "required when %s is set (the PEM certificate of that key)", pr.key)
		}
	}
	if f.HTTPTLSClientCA != "" && f.HTTPTLSCert == "" {
		p.bad("httpTlsClientCa", "needs httpTlsCert and httpTlsKey: client certificates are asked for only over HTTPS")
	}
	if f.NatsServerConfig != "" && f.NatsURL != "" {
		p.bad("natsServerConfig", "configures the embedded NATS server, which runs only when natsUrl is empty")
	}
	if err := (embedded.Config{Sync: f.NatsSync}).Validate(); err != nil {
		p.bad("natsSync", "%q is neither always nor a duration such as 2m", f.NatsSync)
	} else if f.NatsSync != "" && f.NatsSync != embedded.SyncAlways && f.NatsURL != "" {
		p.bad("natsSync", "configures the embedded NATS server, which runs only when natsUrl is empty: set sync_interval in the external servers' jetstream block (docs/operate.md)")
	}
	if f.NatsAllowAnonymous && f.NatsURL != "" {
		p.bad("natsAllowAnonymous", "applies to the embedded NATS server, which runs only when natsUrl is empty")
	}
	if f.NatsInboxPrefix != "" {
		if err := checkInboxPrefix(f.NatsInboxPrefix); err != nil {
			p.bad("natsInboxPrefix", "%v", err)
		}
	}
}

// validateTelemetry checks the keys of traces, metrics and logs.
func (f *File) validateTelemetry(p *problems) {
	switch f.TracesExporter {
	case "", "none", "otlp-grpc", "otlp-http":
	default:
		p.bad("tracesExporter", "%q is not none, otlp-grpc or otlp-http", f.TracesExporter)
	}
	if f.TraceSampleRatio < 0 || f.TraceSampleRatio > 1 {
		p.bad("traceSampleRatio", "%v is not within [0, 1]", f.TraceSampleRatio)
	}
	switch f.TraceDetail {
	case "", telemetry.TraceDetailRequest, telemetry.TraceDetailStages:
	default:
		p.bad("traceDetail", "%q is not request or stages", f.TraceDetail)
	}
	if f.MetricsListen != "" && f.MetricsListen != MetricsOff {
		if _, _, err := splitHostPort(f.MetricsListen); err != nil {
			p.bad("metricsListen", "%q is not host:port or off", f.MetricsListen)
		}
	}
	if f.LogFormat != "" && f.LogFormat != "text" && f.LogFormat != "json" {
		p.bad("logFormat", "%q is not text or json", f.LogFormat)
	}
	var lvl slog.Level
	if f.LogLevel != "" && lvl.UnmarshalText([]byte(f.LogLevel)) != nil {
		p.bad("logLevel", "%q is not debug, info, warn or error", f.LogLevel)
	}
}

// resolveAliases folds timeWindow into maxWait and countWindow into
// maxBatch; giving both names of one setting with different values is an
// error naming them.
func (f *File) resolveAliases() error {
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
	fold("timeWindow", f.TimeWindow, "maxWait", &f.MaxWait)
	fold("countWindow", f.CountWindow, "maxBatch", &f.MaxBatch)
	f.TimeWindow, f.CountWindow = 0, 0
	return errors.Join(errs...)
}

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

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("port %q is not a number", p)
	}
	return host, port, nil
}
