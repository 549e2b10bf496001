package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/cluster-serving/cluster-serving/mesh/serving"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

type serveFlags struct {
	config string // absolute: for the pid file, restart and the banner
	nats   string
}

func parseServeFlags(name string, args []string, stderr io.Writer) (*serveFlags, *serving.File, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &serveFlags{}
	fs.StringVar(&f.config, "c", "config.yaml", "config file")
	fs.StringVar(&f.nats, "nats", "", "NATS URL; overrides natsUrl of the config")
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	file, err := serving.LoadFile(f.config)
	if err != nil {
		return nil, nil, err
	}
	if f.nats != "" {
		file.NatsURL = f.nats
	}
	if abs, err := filepath.Abs(f.config); err == nil {
		f.config = abs
	}
	return f, file, nil
}

func (f *serveFlags) args() []string {
	a := []string{"-c", f.config}
	if f.nats != "" {
		a = append(a, "-nats", f.nats)
	}
	return a
}

// process is the life every serving command shares (start, worker, http,
// bridge): telemetry, the pid file, a serving.Node built from the config,
// the command's doors beside it, then the ordered stop.
type process struct {
	role           string
	flags          *serveFlags
	file           *serving.File
	stdout, stderr io.Writer
	// node sets what the command's node does (Serve, Describe, Service).
	node func(*serving.Config)
	// doors build the command's doors on the node (nil when off; see
	// runners); they run beside the node until ctx ends.
	doors []doorBuilder
	// announce, when set, says what runs once the doors are built.
	announce func(doorDeps)
}

// doorBuilder builds one door on the node: what runs beside the node
// until ctx ends, nil when the door is off.
type doorBuilder func(doorDeps) (func(context.Context) error, error)

// doorDeps is what a command's doors get.
type doorDeps struct {
	p       *process
	node    *serving.Node
	log     *slog.Logger
	metrics *telemetry.Metrics
}

// requireNATS refuses a command that joins an existing NATS without one.
func requireNATS(role string, file *serving.File) error {
	if file.NatsURL == "" {
		return fmt.Errorf("%s joins an existing NATS: set natsUrl in the config or pass -nats nats://host:4222", role)
	}
	return nil
}

// run is the process's life until ctx ends (a signal, whose cause picks
// stop-now or drain): the node and the doors run in one errgroup; once all
// returned, the node closes (NATS drains, the embedded server stops), then
// the pid file goes and telemetry flushes.
func (p *process) run(ctx context.Context) error {
	tel, metrics, err := setupTelemetry(ctx, p.file, p.stderr)
	if err != nil {
		return err
	}
	log := tel.Logger()
	defer shutdownTelemetry(tel, log)
	log.Debug("effective config", "config", p.file)
	removePID, err := writePID(p.file.JobName, p.role, p.flags.args())
	if err != nil {
		return err
	}
	defer removePID()
	if err := p.checkListeners(); err != nil {
		return err
	}

	cfg := p.file.Node(os.Getenv)
	cfg.Name = "cluster-serving " + p.role + " " + p.file.JobName
	cfg.Version, cfg.Logger, cfg.Metrics = semver(version), log, metrics
	p.node(&cfg)
	if err := p.file.SetKeys(&cfg, os.Getenv); err != nil {
		return err
	}
	node, err := serving.NewNode(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return nodeError(p.file, err)
	}
	defer node.Close()
	deps := doorDeps{p: p, node: node, log: log, metrics: metrics}
	doors, err := runners(deps, p.doors...)
	if err != nil {
		return err
	}
	if p.announce != nil {
		p.announce(deps)
	}
	g, gctx := errgroup.WithContext(ctx)
	serveMetrics(gctx, g, p.file, tel, log)
	g.Go(func() error { return node.Run(gctx) })
	for _, r := range doors {
		g.Go(func() error { return r(gctx) })
	}
	err = g.Wait()
	if cerr := node.Close(); err == nil {
		err = cerr
	}
	if cfg.Serve {
		var processed uint64
		for _, u := range node.Units() {
			processed += u.Stats().Processed
		}
		log.Info("stopped", "processed", processed)
	} else {
		log.Info("stopped")
	}
	return err
}

// cmdStart runs everything one machine needs: the embedded NATS server
// (unless natsUrl names an external one), and for each model its job's
// streams, engine and worker; then the NATS request-reply door, the Redis
// door (when redisUrl is set), the HTTP door (unless httpPort is -1) and
// the gRPC door (when grpcPort is set).
func cmdStart(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, file, err := parseServeFlags("start", args, stderr)
	if err != nil {
		return err
	}
	if f.nats != "" && file.NatsServerConfig != "" {
		// As natsUrl with natsServerConfig in the file: the secured
		// server the deployer configured would silently not run.
		return errors.New("config key \"natsServerConfig\" configures the embedded NATS server, which -nats replaces: drop one")
	}
	p := &process{role: "start", flags: f, file: file, stdout: stdout, stderr: stderr,
		node:  func(c *serving.Config) { c.Serve, c.Service = true, true },
		doors: []doorBuilder{redisRunner, respRunner, httpRunner, grpcRunner, bannerRunner}}
	return p.run(ctx)
}

// bannerRunner is the last runner of `start`, beside its Redis, HTTP and
// gRPC doors: it says how to call the job once its NATS door answers, not
// before.
func bannerRunner(d doorDeps) (func(context.Context) error, error) {
	return func(ctx context.Context) error {
		if d.node.WaitReady(ctx) == nil {
			printHowToCall(d.p.stdout, d.p.file, d.p.flags.config, d.node)
			printOtherModels(d.p.stdout, d.p.file, d.node.Models())
		}
		return nil
	}, nil
}

// cmdWorker joins an existing NATS (natsUrl or -nats) as one more worker.
func cmdWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, file, err := parseServeFlags("worker", args, stderr)
	if err != nil {
		return err
	}
	if err := requireNATS("worker", file); err != nil {
		return err
	}
	p := &process{role: "worker", flags: f, file: file, stdout: stdout, stderr: stderr,
		node: func(c *serving.Config) { c.Serve = true },
		announce: func(d doorDeps) {
			fmt.Fprintf(stdout, "worker of job %q joined %s\n", file.JobName, telemetry.RedactURL(d.node.URL()))
		}}
	return p.run(ctx)
}

var semverRE = regexp.MustCompile(`^v?(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)$`)

// semver turns the build version into the SemVer the micro service requires:
// "v1.2.3" -> "1.2.3"; a git hash or "dev" -> "0.0.0-<it>".
func semver(v string) string {
	if m := semverRE.FindStringSubmatch(v); m != nil {
		return m[1]
	}
	clean := regexp.MustCompile(`[^0-9A-Za-z-]+`).ReplaceAllString(v, "-")
	return "0.0.0-" + strings.Trim(clean, "-")
}
