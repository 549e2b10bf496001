package bench

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// untilInterrupted runs body, the bench's parts, and ends every process
// it started and every temp dir it made when body returns or, first,
// when SIGINT or SIGTERM arrives: then it returns errInterrupted at once,
// and the caller exits non-zero. body's goroutine is left behind on an
// interrupt (its loads may run for minutes); it can start nothing more,
// and the exit ends it.
//
// Temp dirs go into one directory of the run (TMPDIR, which children
// inherit too), so that one RemoveAll covers those of every part, even
// one cut off between making its dir and the defer that removes it.
func untilInterrupted(body func() error) error {
	root, err := os.MkdirTemp("", "cs-bench-run-*")
	if err != nil {
		return err
	}
	defer restoreEnv("TMPDIR")()
	if err := os.Setenv("TMPDIR", root); err != nil {
		os.RemoveAll(root)
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- body() }()
	select {
	case err = <-done:
		children.endAll(false) // none should be left; any that is, is ended
	case <-ctx.Done():
		stop() // a second ^C kills the bench at once; Pdeathsig ends the rest
		children.endAll(true)
		err = errInterrupted
	}
	os.RemoveAll(root)
	return err
}

// restoreEnv returns a func that sets env var key back to its value now.
func restoreEnv(key string) func() {
	old, ok := os.LookupEnv(key)
	return func() {
		if ok {
			os.Setenv(key, old)
		} else {
			os.Unsetenv(key)
		}
	}
}
