// Package netfault is a TCP proxy whose faults a test switches while
// traffic flows: a blackhole that holds every byte as a network partition
// does, refused and cut connections, and added latency. It stands between
// two parties that talk TCP (two NATS servers' route, a client and its
// server) so that a test can break the network between them without
// touching either. It is for tests and test harnesses only.
package netfault
