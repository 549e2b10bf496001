package serving

import "fmt"

// Template returns what `cluster-serving init` writes: config.yaml with
// every key, commented, with its default, and modelPath set to modelPath.
func Template(modelPath string) []byte { return fmt.Appendf(nil, template, modelPath) }

// template is the text of Template; %s is replaced by the model path.
const template = `# cluster-serving configuration. Every key is optional except modelPath.
# Durations are in milliseconds unless a key says otherwise.

## Model ##############################################################
# Directory holding exactly one .onnx model (or the path of the .onnx file).
modelPath: %s
# Several models instead of modelPath (set one of the two, not both): a
# list of {name, version (default "1"), path}. The first is the default
# model: its job is jobName (/predict, the Redis door, "predict" and
# serving.<jobName>.predict reach it); every other model gets the job
# <jobName>-<name>-v<version>, so its NATS subject is
# serving.<jobName>-<name>-v<version>.predict. Over HTTP each is
# /v2/models/<name>/versions/<version>/infer. Example:
# models:
#   - {name: resnet, version: "1", path: models/resnet}
#   - {name: cls, path: models/cls}
models: []
# A model repository instead of modelPath and models (set one of the
# three): a directory with one sub-directory per model and numeric version
# directories inside, as Triton lays them out: <dir>/<name>/<version>/model.onnx
# (or the one .onnx file of the version directory), and an optional Triton
# <dir>/<name>/config.pbtxt (docs/operate.md "config.pbtxt"). The highest
# version serves (or those its version_policy picks); a new one swaps in
# without dropping a request. The model named
# jobName takes the job jobName (/predict, the Redis door and
# serving.<jobName>.predict reach it); every other model the job
# <jobName>-<name>. POST /v2/repository/index, /v2/repository/models/<name>/load
# and /unload control it (docs/api.md "Model repository").
modelRepository: ""
# Seconds between scans of modelRepository for new versions and new
# models. 0: the default, 10; -1: no polling (only load changes what serves).
modelRepositoryPoll: 0
# Model control, Triton's modes: poll (the default; -1 above: explicit)
# loads every model at start and polls; the load/unload API answers 403.
# explicit: no polling, load/unload (with an admin token of
# httpAuthTokenFile) change what serves. none: what loads at start serves.
modelControl: ""
# Names of the repository's models this process runs workers for; empty:
# all. Other models are read only for their description, as ensembles
# need: start another process (cluster-serving worker) with the models a
# slow pipeline step needs, and that step scales on its own.
serveModels: []
# Name of the serving job: the Redis stream, the NATS subjects
# (serving.<jobName>.predict) and the JetStream stream SERVING_<jobName>.
jobName: serving_stream
# Post-processing of output 0: topN(n) (n best classes with scores) or
# pickTopN(n) (first n rows). Empty: raw tensors.
postProcessing: ""
# Resize images to "height,width" before inference (images arrive with the
# Redis door). Empty: keep the size.
imageResize: ""
# Requests already carry the batch dimension.
inputAlreadyBatched: false
# Cores this process may use; derives modelParallelism and threadPerModel
# when those are 0. 0: all cores of the machine.
coreNumberPerMachine: 0
# ONNX Runtime sessions per process (batches run in parallel). 0: 1.
modelParallelism: 0
# Intra-op threads per session. 0: coreNumberPerMachine / modelParallelism.
threadPerModel: 0
# Largest dynamic batch. Requests that find the model idle run at once;
# requests gather into a batch only while the model is busy.
maxBatch: 16
# Once the model is busy, how long a gathering batch may wait for more
# requests (ms). 0: never wait; take what is queued.
maxWait: 0
# The original's names of maxWait (timeWindow, ms) and maxBatch
# (countWindow). 0: unset. Setting both names of one setting to different
# values is an error.
timeWindow: 0
countWindow: 0
# The original's encryption (docs/security.md): the model file is
# encrypted (modelEncrypted: base64 text of AES-CBC, as the original wrote
# it, or of AES-GCM), or the images of the Redis door's records are
# (recordEncrypted: AES-GCM). The secret and the salt come from the environment
# (CLUSTER_SERVING_SECRET, CLUSTER_SERVING_SALT) or from files named there
# (CLUSTER_SERVING_SECRET_FILE, CLUSTER_SERVING_SALT_FILE), never from
# this file.
modelEncrypted: false
recordEncrypted: false
# Path to libonnxruntime.so.1. Empty: $ONNXRUNTIME_LIB, then the cache that
# "make ort" fills (~/.cache/cluster-serving/onnxruntime-1.24.1/).
onnxruntimeLib: ""
# Where ONNX Runtime runs the model: cpu, cuda, tensorrt or openvino. The
# GPU ones need a library built with them (cuda and tensorrt: ONNX
# Runtime's GPU release, onnxruntime-linux-x64-gpu-1.24.1, as
# onnxruntimeLib); a library without it fails the load, naming what it
# offers. A models entry may set its own: {name, path, executionProvider}.
executionProvider: cpu
# Whether ONNX Runtime's threads spin-wait for work between the parallel
# parts of a run. Off: they sleep, and leave the cores to decoding, NATS
# and the doors, which share them. On suits a machine whose cores serve
# ONNX Runtime alone.
threadSpinning: false
# Whether concurrent requests are stacked along dim 0 into one run: auto
# (when dim 0 of every input and output is dynamic), on (also when an
# output's is fixed or unknown; refused when an input's is fixed) or off.
# The decision and its reason show in the model metadata (/v2/models/<m>,
# /models) and in "cluster-serving status". A models entry may set its
# own: {name, path, batching: off}.
batching: auto

## NATS and JetStream ##################################################
# External NATS server(s), comma-separated. Empty: run an embedded NATS
# server with JetStream in this process (single-machine mode).
natsUrl: ""
# NATS credentials: a .creds file, or an nkey seed file for an nkey user.
# A user and password can go in natsUrl instead
# (nats://user:password@host:4222; logs and banners show xxxxx), or in the
# environment as NATS_USER and NATS_PASSWORD (or NATS_TOKEN), which every
# command reads, as the nats CLI does.
natsCredentials: ""
# TLS to NATS: the CA that signed the servers' certificates (PEM), and a
# client certificate and key when the servers verify clients.
natsTlsCa: ""
natsTlsCert: ""
natsTlsKey: ""
# Prefix of the inboxes of every NATS connection of the service (replies,
# pulled work, the doors' results): grant the service's NATS user
# subscribe on <prefix>.> and no other user (README "Security").
natsInboxPrefix: _INBOX_cs
# A nats-server configuration file for the embedded server, read by
# nats-server's own parser: authorization, users, nkeys, accounts, tls.
# natsListen wins over the file's listen and port; JetStream is always on;
# the file's store_dir and max_payload win over natsStoreDir and
# natsMaxPayload. start's own connection needs no credentials, except with
# operator JWTs, an auth callout, a bcrypt token or users in several
# accounts: then set natsCredentials, natsTlsCert/natsTlsKey or
# NATS_USER/NATS_PASSWORD.
natsServerConfig: ""
# The embedded server refuses to listen beyond loopback with no
# authentication in natsServerConfig (users, nkeys, token, operator, auth
# callout, or tls with verify: true); true allows it.
natsAllowAnonymous: false
# Where the embedded NATS server listens. An empty host (:4222) is
# 127.0.0.1.
natsListen: 127.0.0.1:4222
# JetStream store of the embedded server. Empty: ./data/jetstream.
natsStoreDir: ""
# When the embedded server's store fsyncs: always (every write, before it
# is acknowledged: an acknowledged request survives a power loss) or an
# interval such as 2m (nats-server's own default: faster, and a power loss
# loses what was acknowledged within it). The file's sync_interval wins.
natsSync: always
# Largest NATS message the embedded server accepts (bytes).
natsMaxPayload: 8388608
# Work queue storage: file (survives restarts) or memory.
queueStorage: file
# JetStream replicas of the streams (1 to 5; 3 on a production cluster).
queueReplicas: 1
# Streams (partitions) the work queue and the results are split into, each
# with its own leader, so that doors publish on while one leader is being
# re-elected after a NATS server dies (1 to 16). 0: 1 when queueReplicas is
# 1, 3 when it is more.
jetstreamPartitions: 0
# Limits of the work queue; when full, new requests are refused with 503
# (never silently dropped). 0: the defaults below; -1: no limit.
queueMaxMsgs: 100000
queueMaxBytes: 1073741824
# How long a worker may hold a request before it is redelivered (ms): also
# how long the requests a killed worker held wait for another worker.
# Workers beat every request they hold, so a slow model needs no more.
ackWait: 10000
# Deliveries of one request before it is answered with an error.
maxDeliver: 5
# How long durable results are kept for doors to collect (seconds).
resultTTL: 600
# Requests one worker process holds at once (decoding, queued, running).
workerInflight: 64
# The most requests a door stores in one work message: those that arrive
# while its earlier stores are on their way to JetStream go together, and
# the worker splits them (a lone request is never held back). 0: 64;
# 1: each request alone (workers older than this key run no batch).
coalesce: 0
# On shutdown, how long in-flight work may take to finish (seconds).
shutdownGrace: 30

## Response cache (Triton's response_cache; docs/triton.md) ##########
# Answers kept in one JetStream key-value bucket (CS_CACHE) that every
# door and worker of the mesh shares: a repeat of a request (same model,
# version, inputs and requested outputs; any id, JSON, binary or gRPC)
# is answered by the door that gets it, without running the model. A
# model's config.pbtxt turns it on (response_cache { enable: true });
# responseCache does for the models without one: modelPath's, and the
# models entries, each of which may set its own
# ({name, path, responseCache: true}). Only Open Inference Protocol
# requests (/v2/models/<m>/infer, gRPC ModelInfer) are answered from it.
responseCache: false
# Bounds of the bucket, for the whole mesh, set by the doors that make
# it: its bytes (when full, the oldest answers go) and how long an answer
# is kept (seconds).
responseCacheMaxBytes: 268435456
responseCacheTTL: 600

## Scheduling (Triton's dynamic_batching queue settings; docs/triton.md) #
# A config.pbtxt's priority_levels, default_priority_level,
# default_queue_policy and priority_queue_policy, written as there, for
# the models without a config.pbtxt (modelPath's and the models entries).
# Requests pick a level with the priority parameter (1 the highest) and
# may lower the queue timeout with timeout (µs) where allowed; e.g.
# dynamicBatching: "priority_levels: 2 default_priority_level: 2 default_queue_policy { max_queue_size: 1000 }"
dynamicBatching: ""

## Redis door (Analytics Zoo / BigDL clients) ###########################
# The Redis the clients use: host:port (the original's default was
# localhost:6379), redis://[user:password@]host:port[/db], or rediss://
# for TLS. Empty: no Redis door.
redisUrl: ""
redisMaxmemory: ""
redisTimeout: 5000
# TLS to Redis, trusting redisSecureTrustStorePath: a PEM CA file, or the
# original's PKCS#12 trust store opened with redisSecureTrustStorePassword.
redisSecureEnabled: false
redisSecureTrustStorePath: ""
redisSecureTrustStorePassword: ""
# A client certificate and key (PEM) for Redis servers that verify
# clients (tls-auth-clients yes). The trust store and the client
# certificate also apply to a rediss:// redisUrl; a client certificate
# needs TLS (redisSecureEnabled or rediss://).
redisTlsCert: ""
redisTlsKey: ""

## RESP door (Redis clients with no Redis server; docs/resp.md) #######
# Where the RESP door listens (host:port), speaking the Redis protocol
# to the same clients as the Redis door (XADD to jobName, then HGETALL
# cluster-serving_<jobName>:<uri>) with no redis-server: requests go
# straight to JetStream and results are kept in a JetStream key-value
# bucket per job. Empty: no RESP door.
respListen: ""
# AUTH: set respPasswordFile (a file holding the password) and every
# command needs AUTH [respUser] <password> first (respUser: default).
respUser: ""
respPasswordFile: ""
# TLS: certificate and key (PEM); with respTlsClientCa (a CA, PEM) every
# client must present a certificate it signed.
respTlsCert: ""
respTlsKey: ""
respTlsClientCa: ""
# How long a result nobody read and deleted is kept (seconds; 0: 3600).
respResultTTL: 0
# A connection that sends nothing for respIdleTimeout (ms; 0: 300000) is
# closed. At most respMaxConnections stay open (0: 4096, or a quarter of
# the open-file limit when lower); past it the idlest is closed.
respIdleTimeout: 0
respMaxConnections: 0
# Keyspace notifications the door starts with, as CONFIG SET
# notify-keyspace-events takes them (e.g. Kh: an hset message on
# __keyspace@0__:cluster-serving_<job>:<uri> when a result is stored, for
# clients that wait with PSUBSCRIBE instead of polling); "": none, until a
# client sets them. Set it when several RESP door processes serve one
# address: CONFIG SET reaches only the process of its connection.
respNotifyKeyspaceEvents: ""

## HTTP door (REST /predict and Open Inference Protocol /v2) ##########
# Where the HTTP door listens. httpPort -1: no HTTP door.
httpInterface: 0.0.0.0
httpPort: 10020
# How long a request may wait for its answer (ms); past it the answer is
# 504 and the queued work is dropped unrun.
httpRequestTimeout: 30000
# Largest request body (bytes); larger ones get 413.
httpMaxBodyBytes: 16777216
# Connection bounds, for the gRPC door too. A connection with no request
# in flight is closed after httpIdleTimeout (ms). Reading one request,
# body included, may take httpReadTimeout (ms); a request, from its
# header to its answer, httpWriteTimeout (ms; 0: httpReadTimeout +
# tokenAcquireTimeout + httpRequestTimeout + 10s; it must be longer than
# httpRequestTimeout). At most httpMaxConnections connections stay open
# (0: 4096, or a quarter of the open-file limit when lower); past it the
# door closes the connection idle the longest to admit a new one.
httpIdleTimeout: 60000
httpReadTimeout: 60000
httpWriteTimeout: 0
httpMaxConnections: 0
# HTTPS: certificate and key (PEM). Set, the door serves HTTPS only.
httpTlsCert: ""
httpTlsKey: ""
# A CA (PEM): set, every client must present a certificate it signed.
httpTlsClientCa: ""
# A file of bearer tokens, one per line; set, every route but GET /,
# /v2/health/live and /v2/health/ready needs "Authorization: Bearer
# <token>", else 401. The file is re-read when it changes.
httpAuthTokenFile: ""
# Token bucket in front of inference, one for each of the HTTP and gRPC
# doors: at most tokensPerSecond requests a second (bursts of as many); a
# request that gets no token within tokenAcquireTimeout (ms) is answered
# 429 (ResourceExhausted over gRPC).
tokenBucketEnabled: false
tokensPerSecond: 100
tokenAcquireTimeout: 100

## gRPC door (Open Inference Protocol / KServe v2 gRPC) ###############
# The port of the gRPC door (inference.GRPCInferenceService, with server
# reflection and grpc.health.v1) on httpInterface; 0: no gRPC door. It
# uses the HTTP door's httpTlsCert, httpTlsKey, httpTlsClientCa,
# httpAuthTokenFile (metadata "authorization: Bearer <token>"),
# httpRequestTimeout and httpMaxBodyBytes (largest message).
grpcPort: 0

## Image pre-processing ################################################
# Images decode as the original did: channel order BGR, values 0-255,
# layout CHW. For ONNX models trained otherwise:
# imageLayout CHW or HWC; imageChannels BGR or RGB; each value becomes
# (value * imageScale - imageMean[c]) / imageStd[c]. Mean and std are
# "a,b,c" per channel, in the output channel order; empty: 0 and 1.
imageLayout: CHW
imageChannels: BGR
imageScale: 1
imageMean: ""
imageStd: ""
# Image budget, per process. An image's header is checked before any
# pixel is decoded: width*height above imageMaxPixels is a bad request
# (400 / NaN). 0: 256*h*w of imageResize, at least 16777216 (4096x4096,
# a 12 MP photo passes) and at most 33554432; without imageResize
# 4194304 (2048x2048). At most 33554432.
imageMaxPixels: 0
# Images decoding at once; the others wait while their request lasts.
# 0: the number of cores (GOMAXPROCS).
imageDecodeConcurrency: 0
# Bytes the images decoding at once may cost (decoded pixels plus the
# float tensor). An image that finds no room within a second is refused
# as busy (503; the worker retries the record later). 0: 536870912 (512 MiB).
imageMemoryBudget: 0

## Telemetry ###########################################################
# Traces: none, otlp-grpc or otlp-http. The standard OTEL_EXPORTER_OTLP_*
# variables apply too (headers, certificates, and the endpoint when
# otlpEndpoint is empty); OTEL_TRACES_SAMPLER_ARG sets the ratio when
# traceSampleRatio is 0.
tracesExporter: none
# Collector address: host:port, or a URL (http://host:4318/v1/traces).
otlpEndpoint: ""
otlpInsecure: false
# Fraction of new traces sampled (parent-based: a request arriving with a
# traceparent follows its caller's decision). 0: 1.0.
traceSampleRatio: 0
# Spans per traced request: request (the door's span and the worker's
# process span) or stages (also publish, queue wait, decode, infer batch,
# onnxruntime run, encode and reply: nine spans, several times the cost).
traceDetail: request
# Prometheus metrics at http://<metricsListen>/metrics; off: none. Give
# each process on a machine its own port.
metricsListen: 127.0.0.1:9464

## Logs ################################################################
# text or json; debug, info, warn or error. Request lines carry trace_id
# and span_id.
logFormat: text
logLevel: info
`
