package mesh

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Names of the NATS objects for a job J. Subjects, streams and headers are
// part of the wire contract between processes: change them only with a
// migration plan.
const (
	// SubjectPrefix starts every subject: serving.<J>.work, serving.<J>.results.>, serving.<J>.predict.
	SubjectPrefix = "serving"
	// StreamPrefix starts the stream names: SERVING_<J> and SERVING_<J>_RESULTS.
	StreamPrefix = "SERVING_"
	// ResultsStreamSuffix ends the results stream name.
	ResultsStreamSuffix = "_RESULTS"
	// WorkersConsumer is the durable pull consumer all workers of a job share.
	WorkersConsumer = "workers"
	// ServiceName is the NATS micro service name.
	ServiceName = "cluster-serving"
	// EndpointName is the micro endpoint name; metadata "job" tells jobs apart.
	EndpointName = "predict"
	// MetadataJob is the endpoint metadata key holding the job name.
	MetadataJob = "job"
	// DefaultJob is the job of a config that names none (SPEC: jobName).
	DefaultJob = "serving_stream"
)

// Headers on work and result messages.
const (
	// HeaderMsgID is the door-supplied id JetStream uses to drop duplicates.
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderURI is the client's record id; copied onto the result.
	HeaderURI = "Cs-Uri"
	// HeaderContentType is the payload's content type, passed to Predict.
	HeaderContentType = "Cs-Content-Type"
	// HeaderReplyTo is the core NATS subject a synchronous caller waits on.
	HeaderReplyTo = "Cs-Reply-To"
	// HeaderReplyForm says how the worker writes its reply to
	// Cs-Reply-To: absent, a result message (Cs-Status, Cs-Error, the
	// body) that a Client reads; ReplyFormMicro, a NATS micro reply that
	// the NATS door's caller reads as it is (see Client.Forward).
	HeaderReplyForm = "Cs-Reply-Form"
	// HeaderReceived is when the NATS door took a request it forwards,
	// unix nanoseconds: the worker that answers records the door's request
	// latency from it.
	HeaderReceived = "Cs-Received"
	// HeaderResultTo is a subject under the results stream; the worker
	// publishes there with a PubAck before it acks the work.
	HeaderResultTo = "Cs-Result-To"
	// HeaderDeadline is the caller's deadline in unix nanoseconds; expired
	// work is acked and dropped without inference.
	HeaderDeadline = "Cs-Deadline"
	// HeaderStatus is the result status, one of wire's Status* codes: 200,
	// or 400, 500, 503, 504 from a worker.
	HeaderStatus = "Cs-Status"
	// HeaderError is the error message of a non-200 result.
	HeaderError = "Cs-Error"
	// HeaderCompute is a 200 result's compute times, nanoseconds
	// "input,infer,output" (Triton's compute_input, compute_infer,
	// compute_output of the request): an ensemble sums its steps'.
	HeaderCompute = "Cs-Compute"
	// HeaderTraceParent and HeaderTraceState are W3C trace context, passed through untouched.
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
	// ReplyFormMicro is HeaderReplyForm's value for a micro reply: the body
	// alone on success; on error no body and micro's
	// Nats-Service-Error-Code (the status) and Nats-Service-Error headers.
	ReplyFormMicro = "micro"
	// HeaderContentTypeHTTP is the content type header of micro requests.
	HeaderContentTypeHTTP = "Content-Type"
	// DefaultContentType is used when a request names none.
	DefaultContentType = "application/json" // wire.MediaTypeJSON: the mesh links no codec
)

var jobRegexp = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// ValidateJob returns ErrInvalidJob unless job matches ^[A-Za-z0-9_-]+$.
func ValidateJob(job string) error {
	if !jobRegexp.MatchString(job) {
		return fmt.Errorf("%w: %q", ErrInvalidJob, job)
	}
	return nil
}

// StreamName is the work-queue stream of job: SERVING_<job>.
func StreamName(job string) string { return StreamPrefix + job }

// ResultsStreamName is the results stream of job: SERVING_<job>_RESULTS.
func ResultsStreamName(job string) string { return StreamPrefix + job + ResultsStreamSuffix }

// WorkSubject is the subject of job's work queue: serving.<job>.work.
func WorkSubject(job string) string { return SubjectPrefix + "." + job + ".work" }

// ResultsSubject is the subject under the results stream for a door:
// serving.<job>.results.<door>. Pass ">" for the whole stream.
func ResultsSubject(job, door string) string {
	return SubjectPrefix + "." + job + ".results." + door
}

// PredictSubject is the micro endpoint subject of job: serving.<job>.predict.
func PredictSubject(job string) string { return SubjectPrefix + "." + job + ".predict" }

// predictSubjects lists the PredictSubject of each of jobs, space-separated.
func predictSubjects(jobs []string) string {
	out := make([]string, len(jobs))
	for i, job := range jobs {
		out[i] = PredictSubject(job)
	}
	return strings.Join(out, " ")
}

// isResultsSubject reports whether subject lies under job's results stream.
func isResultsSubject(job, subject string) bool {
	rest, ok := strings.CutPrefix(subject, ResultsSubject(job, ""))
	return ok && rest != "" && !strings.ContainsAny(rest, " \t\r\n")
}

// Bodies past max_payload (large.go).
const (
	BodiesBucket = "CS_BODIES"
	BodiesTTL    = time.Hour
	// HeaderBodyRef names the object holding the message's body.
	HeaderBodyRef = "Cs-Body-Ref"
	// bodyHeadroom is what max_payload keeps for a message's headers
	// (trace context, uri, reply, deadline) beside an inline body.
	bodyHeadroom = 64 << 10
)
