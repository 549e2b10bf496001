package main

// configTemplate is what `cluster-serving init` writes: every key, commented,
// with its default. %s is replaced by the model path.
const configTemplate = `# cluster-serving configuration. Every key is optional except modelPath.
# Durations are in milliseconds unless a key says otherwise.

## Model ##############################################################
# Directory holding exactly one .onnx model (or the path of the .onnx file).
modelPath: %s
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
# Encrypted models and records are not supported; keep these false.
modelEncrypted: false
recordEncrypted: false
# Path to libonnxruntime.so.1. Empty: $ONNXRUNTIME_LIB, then the cache that
# "make ort" fills (~/.cache/cluster-serving/onnxruntime-1.24.1/).
onnxruntimeLib: ""

## NATS and JetStream ##################################################
# External NATS server(s), comma-separated. Empty: run an embedded NATS
# server with JetStream in this process (single-machine mode).
natsUrl: ""
# NATS credentials file (.creds) for an external NATS.
natsCredentials: ""
# Where the embedded NATS server listens.
natsListen: 127.0.0.1:4222
# JetStream store of the embedded server. Empty: ./data/jetstream.
natsStoreDir: ""
# Largest NATS message the embedded server accepts (bytes).
natsMaxPayload: 8388608
# Work queue storage: file (survives restarts) or memory.
queueStorage: file
# JetStream replicas of the streams (1 to 5; 3 on a production cluster).
queueReplicas: 1
# Limits of the work queue; when full, new requests are refused with 503
# (never silently dropped). 0: the defaults below; -1: no limit.
queueMaxMsgs: 100000
queueMaxBytes: 1073741824
# How long a worker may hold a request before it is redelivered (ms).
ackWait: 30000
# Deliveries of one request before it is answered with an error.
maxDeliver: 5
# How long durable results are kept for doors to collect (seconds).
resultTTL: 600
# Requests one worker process holds at once (decoding, queued, running).
workerInflight: 64
# On shutdown, how long in-flight work may take to finish (seconds).
shutdownGrace: 30

## Redis door (Analytics Zoo / BigDL clients) ###########################
# host:port of the Redis the clients use (the original's default was
# localhost:6379). Empty: no Redis door.
redisUrl: ""
redisMaxmemory: ""
redisTimeout: 5000
redisSecureEnabled: false
redisSecureTrustStorePath: ""
redisSecureTrustStorePassword: ""

## Logs ################################################################
# text or json; debug, info, warn or error.
logFormat: text
logLevel: info
`
