package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// cmdStatus prints what the mesh is doing: per job the request rate,
// queue depth and latency, and every worker it finds (micro service
// discovery of cluster-serving-worker plus JetStream consumer info). It
// refreshes every -interval until Ctrl-C; -once prints one snapshot;
// -json prints the document the HTTP door's status page shows.
func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("c", "config.yaml", "config (natsUrl, else the embedded server's natsListen)")
	url := fs.String("nats", "", "NATS URL; overrides the config")
	interval := fs.Duration("interval", 2*time.Second, "refresh period")
	once := fs.Bool("once", false, "print one snapshot and exit")
	asJSON := fs.Bool("json", false, "print the status document, one JSON line a refresh (the HTTP door's GET /ui/status)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var file *serving.File
	if *url == "" {
		var err error
		if file, err = serving.LoadFile(*cfgPath); err != nil {
			return fmt.Errorf("%w (or pass -nats nats://host:4222)", err)
		}
	}
	nc, target, err := dial("cluster-serving status", *url, file)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	tty := isTerminal(stdout)
	for {
		snap, err := mesh.TakeStatus(ctx, nc, js)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		switch {
		case *asJSON:
			err = json.NewEncoder(stdout).Encode(snap)
		case tty && !*once:
			fmt.Fprint(stdout, "\033[H\033[2J") // home and clear
			fallthrough
		default:
			snap.Print(stdout, target)
		}
		if *once || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(*interval):
		}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
