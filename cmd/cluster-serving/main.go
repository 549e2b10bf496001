// Command cluster-serving serves ONNX models behind NATS JetStream work
// queues. See README.md; `cluster-serving help` lists the commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"

	"github.com/cluster-serving/cluster-serving/cmd/cluster-serving/bench"
)

// version is set by the Makefile with -ldflags "-X main.version=...".
var version = "dev"

const usage = `cluster-serving serves ONNX models behind NATS JetStream work queues.

Usage: cluster-serving <command> [flags]

Commands:
  init      write a commented config.yaml with every key
  start     serve: embedded NATS (unless natsUrl is set), workers and the NATS door
  worker    join an external NATS as one more inference worker
  bridge    run the Redis door alone against an external NATS
  http      run the HTTP door alone against an external NATS
  predict   send one request to a running job and print the answer
  status    live throughput, latency, queue depth and workers of the mesh
  stop      stop the running job now; in-flight work goes back to the queue
  shutdown  stop taking work, finish what is in flight, then exit
  restart   stop the running job and start it again
  bench     measure throughput and latency (what make bench prints)
  version   print the version

Run "cluster-serving <command> -h" for a command's flags.
`

func main() {
	// CLUSTER_SERVING_CPUPROFILE=prefix writes a CPU profile of the whole
	// process life to prefix.<pid>, for `go tool pprof`.
	if path := os.Getenv("CLUSTER_SERVING_CPUPROFILE"); path != "" {
		if f, err := os.Create(fmt.Sprintf("%s.%d", path, os.Getpid())); err == nil && pprof.StartCPUProfile(f) == nil {
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "cluster-serving:", err)
		}
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "init":
		return cmdInit(rest, stdout, stderr)
	case "start":
		return withSignals(func(ctx context.Context, stop <-chan stopKind) error {
			return cmdStart(ctx, stop, rest, stdout, stderr)
		})
	case "worker":
		return withSignals(func(ctx context.Context, stop <-chan stopKind) error {
			return cmdWorker(ctx, stop, rest, stdout, stderr)
		})
	case "bridge":
		return withSignals(func(ctx context.Context, stop <-chan stopKind) error {
			return cmdBridge(ctx, stop, rest, stdout, stderr)
		})
	case "http":
		return withSignals(func(ctx context.Context, stop <-chan stopKind) error { return cmdHTTP(ctx, stop, rest, stdout, stderr) })
	case "predict":
		return cmdPredict(rest, stdout, stderr)
	case "status":
		return withSignals(func(ctx context.Context, _ <-chan stopKind) error { return cmdStatus(ctx, rest, stdout, stderr) })
	case "stop":
		return cmdSignal(rest, stdout, stderr, syscall.SIGINT, "stop")
	case "shutdown":
		return cmdSignal(rest, stdout, stderr, syscall.SIGTERM, "shutdown")
	case "restart":
		return cmdRestart(rest, stdout, stderr)
	case "bench":
		return bench.Main(rest, stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintf(stdout, "cluster-serving %s (%s, %s/%s; ONNX Runtime %s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH, ortVersion)
		return nil
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}

// stopKind says how a serving process was asked to stop.
type stopKind int

const (
	// stopNow (SIGINT, `cluster-serving stop`, Ctrl-C): stop pulling and hand
	// in-flight requests back to the queue; JetStream keeps them, so nothing is
	// lost, and the next start or another worker serves them.
	stopNow stopKind = iota + 1
	// stopDrain (SIGTERM, `cluster-serving shutdown`, Kubernetes): stop pulling,
	// finish in-flight requests within shutdownGrace, then exit.
	stopDrain
)

// withSignals runs fn with a ctx that ends on the first SIGINT or SIGTERM; the
// kind of the first signal is sent on stop. A second signal exits at once.
func withSignals(fn func(ctx context.Context, stop <-chan stopKind) error) error {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer func() { signal.Stop(sigs); close(sigs) }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := make(chan stopKind, 1)
	go func() {
		s, ok := <-sigs
		if !ok {
			return
		}
		if s == syscall.SIGTERM {
			stop <- stopDrain
		} else {
			stop <- stopNow
		}
		cancel()
		if _, ok := <-sigs; ok {
			fmt.Fprintln(os.Stderr, "cluster-serving: second signal, exiting now")
			os.Exit(1)
		}
	}()
	return fn(ctx, stop)
}
