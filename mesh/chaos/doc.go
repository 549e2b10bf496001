// Package chaos is the fault suite and the soak of cluster-serving: it runs
// the real thing (a 3-node nats-server cluster with JetStream, a real
// redis-server with AOF, two `cluster-serving worker` processes, the HTTP
// door, the Redis door and the RESP door (Redis clients, no redis-server),
// each a process of its own), puts steady load on the four doors (NATS,
// HTTP, Redis, RESP) at once, injects faults (kill -9, restarts, Redis out of
// memory, garbage beside good traffic) and accounts for every request:
// answered, lost, answered twice, errors, the longest gap between answers
// and the latency while the fault lasts.
//
// It is test-only: chaos_test.go runs a short version inside `go test
// ./...` (skipped under -short), `make chaos` the whole suite and `make
// soak` a long run at steady load. Nothing here imports the packages under
// test except infer/wire's Redis result encoder, the reference the answers
// are checked against; the processes are driven through the command line
// and config.yaml only, so the suite runs unchanged on any version of the
// code that keeps them.
//
// Every child runs in a process group of its own with a parent-death
// signal, so that a failed or timed-out test leaves nothing running.
package chaos
