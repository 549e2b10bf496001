package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Store recovery: why a stream stops acking after the process ran out of
// file descriptors (or disk), and how it comes back without a restart.
//
// nats-server's file store (v2.15.2, server/filestore.go) keeps the first
// write error it meets and returns it from every later write; nothing
// ever clears it:
//   - a stream's last block closes its file after 30 s without writes
//     (syncBlocks, filestore.go:8402, closeFDsIdle at :341). The next
//     publish must open it again (writeMsgRecordLocked → enableForWriting,
//     :7811 and :7741); under EMFILE that fails and the deferred handler
//     latches it in the block (mb.werr, :7787-7800), storeRawMsg latches
//     it in the store (fs.setWriteErr, :5428-5431 and :5587-5612);
//   - the periodic sync (every sync_interval, 2 min by default) opens the
//     stream's index.db and latches an EMFILE the same way (:8529-8534);
//   - from then on StoreMsg returns the old error at once (:5649), a new
//     block is refused (newMsgBlockForWrite, :5254), and the stream,
//     taking it for an I/O failure, logs it and sends no PubAck at all
//     (processJetStreamMsg, stream.go:7400-7407, "We don't want to respond
//     back to the user"). Publishers wait out their timeout, forever.
//
// Which streams break depends on whether their block file happened to be
// closed, or their sync timer fired, while no descriptor was left: hence
// "1 run in 3", "existing streams dead, a new stream acks". Only a fresh
// file store clears the error; nats-server builds them when JetStream
// starts, from what is on disk, as at a process start (its own config
// reload re-enables JetStream this way, jetstream.go:604). So the watcher
// below restarts JetStream (ShutdownJetStream, which keeps the store, then
// EnableJetStream with the options the server started with) once a
// stream reports a write error and descriptors are available again.
// Messages are not lost: the failed write was never acknowledged, and
// every acknowledged one is on disk or flushed by the shutdown. Clients
// keep their connections; consumers are durable and nats.go pulls again
// after two missed heartbeats.
//
// Raising RLIMIT_NOFILE would not prevent it: Go already raises the soft
// limit to the hard one at start (syscall/rlimit.go), and an attacker
// fills any limit; capping the doors' connections is the doors' part.
//
// A clustered server is left alone: there, nats-server itself moves a
// broken stream's leadership to another replica (setWriteErrLocked,
// stream.go:9814), and restarting JetStream on a cluster member is a
// decision for its operator.
const (
	// storeCheckEvery is how often the watcher asks the server's health
	// check whether a stream has a write error latched.
	storeCheckEvery = time.Second
	// maxRestartPause caps the growing pause between restarts that did
	// not help (a store broken for another reason than resources).
	maxRestartPause = 30 * time.Second
	// fdHeadroom is how many descriptors must be free before a restart:
	// recovering the streams opens their files again, and a recovery
	// that runs out half-way would leave streams unloaded.
	fdHeadroom = 64
)

// storeWatch is the state of Server's store watcher; only watchStore's
// goroutine touches it, except logged, which the log adapter sets.
type storeWatch struct {
	stop chan struct{} // closed by Shutdown
	done chan struct{} // closed when watchStore returns
	// logged is set when nats-server logs a critical write error, which
	// the health check shows only once a publish has failed on it.
	logged atomic.Bool
	// down: our own restart stopped JetStream and could not start it.
	down bool
}

// watchStore restarts JetStream whenever a stream's store has latched a
// write error and enough descriptors are free, until stop closes. The
// pause between restarts grows while they do not help and falls back
// once the store is healthy.
func (s *Server) watchStore(log *slog.Logger) {
	w := s.watch
	defer close(w.done)
	tick := time.NewTicker(storeCheckEvery)
	defer tick.Stop()
	pause, next := storeCheckEvery, time.Time{}
	for {
		select {
		case <-w.stop:
			return
		case now := <-tick.C:
			why, broken := s.storeBroken()
			if !broken {
				pause = storeCheckEvery
				continue
			}
			if now.Before(next) || !haveFDHeadroom() {
				continue
			}
			err := s.restartJetStream()
			w.down = err != nil && !s.ns.JetStreamEnabled()
			log.LogAttrs(context.Background(), slog.LevelWarn, "embedded: restarted JetStream after a store write error",
				slog.String("cause", why), slog.Any("err", err))
			next, pause = now.Add(pause), min(2*pause, maxRestartPause)
		}
	}
}

// storeBroken reports whether a stream of this single server has a write
// error latched (or could not be loaded after a restart), or whether
// JetStream is down because a restart of ours failed; and why.
func (s *Server) storeBroken() (string, bool) {
	if s.ns.JetStreamIsClustered() {
		return "", false
	}
	if s.watch.logged.Load() {
		return "a critical write error was logged", true
	}
	h := s.ns.Healthz(&server.HealthzOptions{Details: true})
	for _, e := range h.Errors {
		if e.Type == server.HealthzErrorStream || (e.Type == server.HealthzErrorJetStream && s.watch.down) {
			return e.Error, true
		}
	}
	return "", false
}

// restartJetStream stops JetStream, keeping its store, and starts it again
// with the options the server started with, so that every stream gets a
// fresh file store recovered from disk.
func (s *Server) restartJetStream() error {
	s.watch.logged.Store(false)
	if s.ns.JetStreamEnabled() {
		if err := s.ns.ShutdownJetStream(); err != nil {
			return fmt.Errorf("embedded: stop JetStream: %w", err)
		}
	}
	cfg := s.jsConfig // EnableJetStream rewrites StoreDir in place
	if err := s.ns.EnableJetStream(&cfg); err != nil {
		return fmt.Errorf("embedded: start JetStream: %w", err)
	}
	return nil
}

// jetStreamConfig is the JetStream config nats-server's Start derives from
// o (server.go, Start), once NewServer has applied its defaults.
func jetStreamConfig(o *server.Options) server.JetStreamConfig {
	return server.JetStreamConfig{
		StoreDir:     o.StoreDir,
		SyncInterval: o.SyncInterval,
		SyncAlways:   o.SyncAlways,
		Strict:       !o.NoJetStreamStrict,
		MaxMemory:    o.JetStreamMaxMemory,
		MaxStore:     o.JetStreamMaxStore,
		Domain:       o.JetStreamDomain,
		CompressOK:   true,
		UniqueTag:    o.JetStreamUniqueTag,
	}
}

// haveFDHeadroom reports whether fdHeadroom more files can be opened now.
func haveFDHeadroom() bool {
	var files []*os.File
	defer func() {
		for _, f := range files {
			_ = f.Close()
		}
	}()
	for range fdHeadroom {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return false
		}
		files = append(files, f)
	}
	return true
}

// criticalWriteError reports whether an error line of nats-server's is
// its file store latching a write error ("Filestore [S] Critical write
// error: ..."). The text is nats-server's; should it change, the health
// check still finds the stream once a publish fails on it.
func criticalWriteError(line string) bool {
	return strings.Contains(line, "Critical write error")
}
