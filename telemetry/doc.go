// Package telemetry owns the OpenTelemetry SDK of the process: Setup
// installs the global tracer provider, meter provider (Prometheus
// exporter) and W3C propagator, builds the slog logger, and Shutdown
// flushes them last of all. It also owns the NATS header carrier that
// moves trace context across JetStream hops, and the project's metric
// instruments. Every other package uses only the OTel API
// (otel.Tracer(telemetry.ScopeName), telemetry.Inject/Extract,
// *telemetry.Metrics); none imports the SDK.
//
// # Configuration
//
// Config holds values; telemetry never reads the environment itself. The
// SDK's OTLP exporters do read OTEL_EXPORTER_OTLP_* (headers, timeout,
// compression, certificates, and the endpoint when Config.OTLPEndpoint is
// empty) and resource.Default reads OTEL_RESOURCE_ATTRIBUTES; explicit
// Config fields win. cmd maps config.yaml onto Config.
//
// With TracesExporter "none" no SDK tracer provider exists: spans are
// API no-ops (about one allocation each), yet a traceparent that arrives
// at a door is still forwarded to the next hop and still appears as
// trace_id in logs.
//
// # Propagation
//
// A door extracts context from what it received (HTTP headers, Redis
// fields, NATS headers) and every hop that publishes injects into the
// message: telemetry.Inject(ctx, msg.Header) before Publish,
// ctx = telemetry.Extract(ctx, msg.Header) on receipt. Keys are the W3C
// ones in lower case: traceparent, tracestate, baggage.
//
// # Spans (names are the Span* constants)
//
//	door          "POST /predict" (HTTP semconv), SpanDoorRedis, SpanDoorNATS   kind server/consumer
//	              "inference.GRPCInferenceService/ModelInfer" (gRPC semconv)     kind server
//	mesh.Client   SpanPublish  "jetstream publish"   producer, child of the door span; injects headers
//	worker        SpanQueueWait "queue wait"          internal, started at the JetStream
//	                                                  publish timestamp, ended at pull
//	worker        SpanProcess  "jetstream process"   consumer, child of the extracted publish span
//	worker        SpanDecode   "decode"              internal, child of SpanProcess
//	batcher       SpanBatch    "infer batch"         internal, new root, one Link per message
//	                                                  (telemetry.Link(msg.Header)), attr batch size
//	batcher       SpanInferRun "onnxruntime run"     internal, child of SpanBatch
//	worker        SpanEncode   "encode"              internal, child of SpanProcess
//	worker        SpanResultWrite / SpanReply        producer, child of SpanProcess
//	redis door    SpanResultDeliver "redis result write"  client, child of the extracted result
//
// Names stay low-cardinality; the job, model and subject go in attributes
// (messaging.destination.name, job_name, model).
//
// Config.TraceDetail picks which of them record. At TraceDetailStages
// (config key traceDetail: stages) all do. At TraceDetailRequest, the
// default, only the door spans, SpanProcess and SpanResultDeliver do:
// the other spans come from tracers of the stage scopes (infer's,
// infer/wire's and MeshStagesScope), which Setup hands a tracer that
// starts nothing (WithTraceDetail), so SpanProcess is the door span's
// child and carries the queue wait and the batch as attributes.
//
// A request sampled out (parent-based sampling: the door's root span was
// not drawn, or the caller's traceparent says not sampled) costs one span
// at most: every later hop starts its span with telemetry.Start, which
// hands back the sampled-out parent instead of a span nobody records, and
// attributes, links and the like are built only when span.IsRecording().
// The traceparent still travels with every message, so that each hop
// follows the door's decision.
//
// # Metrics
//
// Instrument names follow OTel conventions (dot-separated, unit in the
// unit field); the Prometheus exporter turns dots into underscores and
// appends the unit and _total:
//
//	cluster_serving.requests             counter    {request}  door, job_name, outcome
//	  → cluster_serving_requests_total
//	cluster_serving.request.duration     histogram  s          door, job_name, outcome
//	  → cluster_serving_request_duration_seconds   end to end at the door
//	cluster_serving.stage.duration       histogram  s          stage, job_name, model
//	  → cluster_serving_stage_duration_seconds     stage: queue_wait, decode, infer, encode, result_write
//	cluster_serving.batch.size           histogram  {request}  job_name, model
//	  → cluster_serving_batch_size
//	cluster_serving.queue.pending        gauge      {message}  job_name   (observed per scrape)
//	  → cluster_serving_queue_pending
//	cluster_serving.queue.ack_pending    gauge      {message}  job_name   (observed per scrape)
//	  → cluster_serving_queue_ack_pending
//	cluster_serving.workers              updown     {worker}   job_name, model
//	  → cluster_serving_workers
//	cluster_serving.model.load.duration  histogram  s          model, outcome
//	  → cluster_serving_model_load_duration_seconds
//	cluster_serving.cache.lookups        counter    {lookup}   job_name, model, result
//	  → cluster_serving_cache_lookups_total        response cache at a door; result: hit, miss
//	cluster_serving.cache.lookup.duration histogram s          job_name, model, result
//	  → cluster_serving_cache_lookup_duration_seconds  decode, lookup and, on a hit, encode
//
// Latency histograms use LatencyBuckets (0.5 ms to 30 s), batch sizes
// BatchSizeBuckets (1 to 512), model loads ModelLoadBuckets (50 ms to
// 300 s). The job attribute is job_name because Prometheus reserves the
// job label for the scrape target. The registry also carries the Go
// runtime and process collectors (go_*, process_*) and target_info.
package telemetry
