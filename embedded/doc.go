// Package embedded runs a nats-server with JetStream inside the current
// process, for single-node mode and for tests.
//
// It owns the server's lifetime and its security rules: a nats-server
// config file (Config.ConfigFile, parsed by nats-server itself) brings
// authorization, accounts and TLS; a listener beyond loopback without
// authentication is refused (*AnonymousError); and the process's own
// in-process connection gets an identity the network cannot use
// (Server.ConnectOption). Callers get a client URL or that connect option
// and otherwise talk to it as to any NATS server, so no other package
// needs to know that NATS is embedded.
//
// It also keeps the store serving: nats-server's file store refuses
// every write, for good, once one failed, and a process that ran out of
// file descriptors or disk for a moment would have streams that never
// ack a publish again. The server restarts JetStream on its store once
// the resources are back (recover.go).
package embedded
