// Package embedded runs a nats-server with JetStream inside the current
// process, for single-node mode and for tests.
//
// It owns the server's lifetime only: callers get a client URL or an
// in-process connect option and otherwise talk to it as to any NATS server,
// so no other package needs to know that NATS is embedded.
package embedded
