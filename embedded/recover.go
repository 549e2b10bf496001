package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
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
// stream reports such a write error and descriptors are available again.
// The restart loses nothing a process restart would keep: the write that
// failed was never acknowledged, the shutdown flushes what the blocks
// still hold, and the streams are recovered from the same files. Clients
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
//
// Only errors that go away on their own are worth a restart: running out
// of descriptors, disk or memory (resourceError). A permission or I/O
// error stays until an operator acts, and nats-server itself stops
// JetStream on a permission error; restarting on those would only
// interrupt the healthy streams again and again.
const (
	// storeCheckEvery is how often the watcher asks the server's health
	// check whether a stream has a write error latched.
	storeCheckEvery = time.Second
	// maxRestartPause caps the growing pause between restarts that did
	// not help, such as one during the attack itself: short enough that
	// the store is back within 10 s of the resources.
	maxRestartPause = 8 * time.Second
	// fdHeadroom is how many descriptors must be free before a restart:
	// recovering the streams opens their files again, and a recovery
	// that runs out half-way leaves streams unloaded (until the next).
	fdHeadroom = 64
)

// storeWatch is the state of Server's store watcher; only watchStore's
// goroutine touches it, except logged, which the log adapter sets.
type storeWatch struct {
	stop chan struct{} // closed by Shutdown
	done chan struct{} // closed when watchStore returns
	// logged is set when nats-server logs a critical write error caused
	// by resources, which the health check shows only once a publish
	// has failed on it.
	logged atomic.Bool
	// restarted: the watcher restarted JetStream and has not seen the
	// store healthy since, so that a stream the restart could not load,
	// or JetStream it could not start again, is its to retry.
	restarted bool
}

// watchStore restarts JetStream whenever a stream's store has latched a
// resource error and enough descriptors are free, until stop closes. The
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
				pause, w.restarted = storeCheckEvery, false
				continue
			}
			if now.Before(next) || !haveFDHeadroom() {
				continue
			}
			err := s.restartJetStream()
			w.restarted = true
			log.LogAttrs(context.Background(), slog.LevelWarn, "embedded: restarted JetStream after a store write error",
				slog.String("cause", why), slog.Any("err", err))
			next, pause = now.Add(pause), min(2*pause, maxRestartPause)
		}
	}
}

// storeBroken reports whether a stream of this single server has latched
// a resource error, or, after a restart of the watcher's, whether a
// stream could not be loaded or JetStream is down; and why.
func (s *Server) storeBroken() (string, bool) {
	if s.ns.JetStreamIsClustered() {
		return "", false
	}
	if s.watch.logged.Load() {
		return "a critical write error was logged", true
	}
	h := s.ns.Healthz(&server.HealthzOptions{Details: true})
	for _, e := range h.Errors {
		ours := s.watch.restarted && (e.Type == server.HealthzErrorStream || e.Type == server.HealthzErrorJetStream)
		if ours || (e.Type == server.HealthzErrorStream && resourceError(e.Error)) {
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

// criticalWriteError reports whether an error line of nats-server's,
// format and its arguments, is its file store latching a write error
// caused by resources ("Filestore [S] Critical write error: ... too many
// open files"). The text is nats-server's; should it change, the health
// check still finds the stream once a publish fails on it.
func criticalWriteError(format string, v []any) bool {
	return strings.Contains(format, "Critical write error") && resourceError(fmt.Sprintf(format, v...))
}

// resourceErrors are the errors, as the OS words them, of a resource that
// comes back by itself: descriptors (EMFILE, ENFILE), disk (ENOSPC,
// EDQUOT) and memory (ENOMEM).
var resourceErrors = []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOSPC, syscall.EDQUOT, syscall.ENOMEM}

// resourceError reports whether msg, an error nats-server made into text,
// names one of resourceErrors.
func resourceError(msg string) bool {
	return slices.ContainsFunc(resourceErrors, func(e error) bool { return strings.Contains(msg, e.Error()) })
}
