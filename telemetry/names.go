package telemetry

import "go.opentelemetry.io/otel/attribute"

// Attribute keys on metrics (and, where useful, spans). They become
// Prometheus labels of the same name.
//
// The job attribute is "job_name", not "job": Prometheus attaches its own
// target label "job" at scrape time and would rename ours exported_job.
const (
	AttrDoor    = attribute.Key("door")
	AttrJob     = attribute.Key("job_name")
	AttrModel   = attribute.Key("model")
	AttrOutcome = attribute.Key("outcome")
	AttrStage   = attribute.Key("stage")
	AttrResult  = attribute.Key("result")

	// Span attribute keys of the hops a request makes through the work
	// queues (OTel messaging semantic conventions where one fits).
	AttrMessagingSystem      = attribute.Key("messaging.system")
	AttrMessagingDestination = attribute.Key("messaging.destination.name")
	AttrMessagingMsgID       = attribute.Key("messaging.message.id")
	AttrMessagingDelivery    = attribute.Key("messaging.delivery_count")
	AttrQueueWaitMS          = attribute.Key("cluster_serving.queue_wait_ms")
	AttrStatus               = attribute.Key("cluster_serving.status")
	AttrURI                  = attribute.Key("cluster_serving.uri")
)

// Values of AttrDoor.
const (
	DoorRedis = "redis"
	DoorRESP  = "resp"
	DoorNATS  = "nats"
	DoorHTTP  = "http"
	DoorGRPC  = "grpc"
)

// Values of AttrOutcome. Keep the set small: it multiplies series.
const (
	OutcomeOK       = "ok"        // a result was delivered
	OutcomeBadInput = "bad_input" // payload or pre-processing rejected the record
	OutcomeError    = "error"     // inference or internal failure
	OutcomeTimeout  = "timeout"   // ctx deadline passed before a result
	OutcomeRejected = "rejected"  // a bounded queue was full
)

// Values of AttrResult on the response cache's metrics.
const (
	CacheHit  = "hit"  // answered from the cache
	CacheMiss = "miss" // sent to a worker
)

// Values of AttrStage on cluster_serving.stage.duration.
const (
	StageQueueWait   = "queue_wait"   // JetStream publish to worker pull
	StageDecode      = "decode"       // payload decode and pre-processing
	StageInfer       = "infer"        // model run for the whole batch
	StageEncode      = "encode"       // post-processing and result encoding
	StageResultWrite = "result_write" // result store or reply
)

// Span names for the hops of one request (see doc.go). Names stay low
// cardinality: the job or model goes in attributes, not in the name,
// except where OTel messaging conventions put the destination in it.
const (
	SpanDoorRedis     = "redis receive"      // consumer: one XREADGROUP entry
	SpanDoorNATS      = "nats request"       // server: a NATS request at the door
	SpanPublish       = "jetstream publish"  // producer: mesh.Client.Submit
	SpanQueueWait     = "queue wait"         // internal: publish time to pull
	SpanProcess       = "jetstream process"  // consumer: one message at a worker
	SpanBatch         = "infer batch"        // internal: one batch, links to each message
	SpanDecode        = "decode"             // internal: per message
	SpanInferRun      = "onnxruntime run"    // internal: child of SpanBatch
	SpanEncode        = "encode"             // internal: per message
	SpanResultWrite   = "result write"       // producer/client: store the result
	SpanReply         = "reply"              // producer: respond to the NATS caller
	SpanResultDeliver = "redis result write" // client: HSET at the Redis door
	SpanDoorRESP      = "resp xadd"          // server: one XADD at the RESP door
	SpanResultPut     = "resp result put"    // client: results put in the RESP door's bucket
	SpanStep          = "pipeline step"      // internal: one step of an ensemble, parent of its publish
)
