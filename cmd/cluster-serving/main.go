// Command cluster-serving serves ONNX models behind NATS JetStream work
// queues. See README.md and docs/; `cluster-serving help` lists the commands.
//
// It is wiring only: a table of commands, their flags, signals, env vars
// and os.Exit. The serving itself is mesh/serving (one Unit per model, one
// Node per process, config.yaml); the doors are bridge/httpdoor and
// bridge/redisdoor; the load generator of `bench` is the package bench.
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
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"

	"github.com/cluster-serving/cluster-serving/cmd/cluster-serving/bench"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// version is set by the Makefile with -ldflags "-X main.version=...".
var version = "dev"

// command is one entry of the command table: what `cluster-serving <name>`
// runs (names[0], or one of its aliases) and its line in the usage text
// (none when summary is empty).
type command struct {
	names   []string
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

// commands is the command table, in the order of the usage text.
func commands() []command {
	return []command{
		{[]string{"init"}, "write a commented config.yaml with every key", cmdInit},
		{[]string{"start"}, "serve: embedded NATS (unless natsUrl is set), workers and the NATS door", withSignals(cmdStart)},
		{[]string{"worker"}, "join an external NATS as one more inference worker", withSignals(cmdWorker)},
		{[]string{"bridge"}, "run the Redis door alone against an external NATS", withSignals(cmdBridge)},
		{[]string{"http"}, "run the HTTP door alone against an external NATS", withSignals(cmdHTTP)},
		{[]string{"predict"}, "send one request to a running job and print the answer", cmdPredict},
		{[]string{"status"}, "live throughput, latency, queue depth and workers of the mesh", withSignals(cmdStatus)},
		{[]string{"stop"}, "stop the running job now; in-flight work goes back to the queue", signalCommand(syscall.SIGINT, "stop")},
		{[]string{"shutdown"}, "stop taking work, finish what is in flight, then exit", signalCommand(syscall.SIGTERM, "shutdown")},
		{[]string{"restart"}, "stop the running job and start it again", cmdRestart},
		{[]string{"bench"}, "measure throughput and latency (what make bench prints)", bench.Main},
		{[]string{"version", "-version", "--version"}, "print the version", cmdVersion},
		{[]string{"help", "-h", "-help", "--help"}, "", cmdHelp},
	}
}

// usage renders the usage text from the command table.
func usage() string {
	var b strings.Builder
	b.WriteString("cluster-serving serves ONNX models behind NATS JetStream work queues.\n\n" +
		"Usage: cluster-serving <command> [flags]\n\nCommands:\n")
	for _, c := range commands() {
		if c.summary != "" {
			fmt.Fprintf(&b, "  %-9s %s\n", c.names[0], c.summary)
		}
	}
	b.WriteString("\nRun \"cluster-serving <command> -h\" for a command's flags.\n")
	return b.String()
}

func main() {
	// The heap of a serving process is small and turns over per request:
	// at Go's default GOGC=100 a 16-core node spent 13% of its CPU in GC
	// and 5% regrowing the stacks GC shrank (issue 23). $GOGC still wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
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

// run looks args[0] up in the command table and runs it with the rest.
func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return errors.New("no command given")
	}
	for _, c := range commands() {
		if slices.Contains(c.names, args[0]) {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprint(stderr, usage())
	return fmt.Errorf("unknown command %q", args[0])
}

func cmdVersion(_ []string, stdout, _ io.Writer) error {
	fmt.Fprintf(stdout, "cluster-serving %s (%s, %s/%s; ONNX Runtime %s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH, infer.ORTVersion)
	return nil
}

// cmdInit writes a commented config.yaml with every key.
func cmdInit(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "config.yaml", "file to write")
	model := fs.String("model", "/path/to/model", "model directory to put in modelPath")
	force := fs.Bool("f", false, "overwrite an existing file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if _, err := os.Stat(*out); err == nil && !*force {
		return fmt.Errorf("%s exists; pass -f to overwrite it", *out)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.WriteFile(*out, serving.Template(*model), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (modelPath: %s); start with: cluster-serving start -c %s\n", *out, *model, *out)
	return nil
}

func cmdHelp(_ []string, stdout, _ io.Writer) error {
	fmt.Fprint(stdout, usage())
	return nil
}

// withSignals adapts a command that runs until its ctx ends: ctx ends on
// the first SIGINT, with cause serving.ErrStopNow (stop now: in-flight
// requests go back to the queue), or SIGTERM, with cause
// serving.ErrShutdown (finish in-flight requests within shutdownGrace). A
// second signal exits at once.
func withSignals(fn func(ctx context.Context, args []string, stdout, stderr io.Writer) error) func([]string, io.Writer, io.Writer) error {
	return func(args []string, stdout, stderr io.Writer) error {
		sigs := make(chan os.Signal, 2)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
		defer func() { signal.Stop(sigs); close(sigs) }()
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		go func() { // ends when sigs closes, as fn returns
			s, ok := <-sigs
			if !ok {
				return
			}
			if s == syscall.SIGTERM {
				cancel(serving.ErrShutdown)
			} else {
				cancel(serving.ErrStopNow)
			}
			if _, ok := <-sigs; ok {
				fmt.Fprintln(os.Stderr, "cluster-serving: second signal, exiting now")
				os.Exit(1)
			}
		}()
		return fn(ctx, args, stdout, stderr)
	}
}
