// Package respdoor is the RESP door: a server of the Redis protocol
// (RESP2, on github.com/tidwall/redcon) that lets the Analytics Zoo /
// BigDL Cluster Serving clients (InputQueue, OutputQueue), redis-cli and
// any Redis client that writes the documented stream and reads the
// cluster-serving_<job>:<uri> hashes talk to the mesh with no Redis
// server at all.
//
// It maps the commands those clients send onto the mesh (SPEC §2):
//   - XADD <job> * uri … data … [serde …] stores the record in the job's
//     JetStream work queue before it answers the entry id <ms>-<seq>,
//     which it assigns itself, rising within a process. The record's
//     message id adds the door process's own random id, so that ids of
//     several RESP door processes, or of one restarted, never collide in
//     JetStream's dedupe. A full queue answers -OOM, as a Redis over
//     maxmemory does; nothing is dropped silently.
//   - HGETALL, HGET, HMGET, EXISTS, DEL, KEYS and SCAN on
//     cluster-serving_<job>:<uri> read the job's results in a JetStream
//     key-value bucket (mesh.ResultBucket), which the door fills from the
//     job's results for door "resp"; the values are the bytes the Redis
//     door writes (redisdoor.ResultValue).
//   - PING, HELLO (RESP2 only), AUTH, CLIENT SETNAME/GETNAME/SETINFO,
//     SELECT 0, INFO, CONFIG GET, QUIT, and XGROUP CREATE (the group is
//     the door itself: BUSYGROUP); anything else is a clear
//     -ERR unknown command that lists what is supported.
//   - CONFIG SET notify-keyspace-events, SUBSCRIBE, PSUBSCRIBE,
//     UNSUBSCRIBE and PUNSUBSCRIBE: Redis's keyspace notifications of
//     the result keys (hset when a result is stored by any door process
//     of the job, del, expired), from the bucket's index
//     (mesh.ResultBucket.OnChange), so that a client waits for its
//     result instead of polling (notify.go, pubsub.go).
//
// Protections: AUTH against a user and a password file (compared in
// constant time; the password is never logged), TLS with a door's
// certificate files (bridge/door.ServerTLS), a cap on connections
// (bridge/door.Listener), an idle timeout, a write timeout, and a bound on
// the bytes of one command. Each XADD is a server span that the worker
// continues; results are counted as door "resp".
//
// The package does not import NATS; cmd passes a *mesh.Client as the
// Mesh.
package respdoor
