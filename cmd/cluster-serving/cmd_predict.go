package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// cmdPredict sends one request to serving.<job>.predict and prints the reply.
func cmdPredict(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("predict", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("c", "config.yaml", "config of the job (jobName, natsUrl/natsListen, modelPath for -fill)")
	data := fs.String("d", "", "request body {\"instances\":[...]}, or @file to read it from a file, or @- for stdin")
	fill := fs.String("fill", "", "build one instance of the model's input shapes with every value set to this number")
	shape := fs.String("shape", "", "with -fill: the instance shape, e.g. 3,48,192 (default: the model's, dynamic dimensions set to 1)")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for the answer")
	url := fs.String("nats", "", "NATS URL (default: natsUrl, else the embedded server's natsListen)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := serving.LoadFile(*cfgPath)
	if err != nil {
		return err
	}
	var body []byte
	switch {
	case *data != "" && *fill != "":
		return errors.New("give -d or -fill, not both")
	case *fill != "":
		body, err = fillRequest(cfg, *fill, *shape)
	case strings.HasPrefix(*data, "@-"):
		body, err = io.ReadAll(os.Stdin)
	case strings.HasPrefix(*data, "@"):
		body, err = os.ReadFile((*data)[1:])
	case *data != "":
		body = []byte(*data)
	default:
		return errors.New("nothing to send: give -d '{\"instances\":[...]}' or -fill 0.5")
	}
	if err != nil {
		return err
	}
	nc, _, err := dial("cluster-serving predict", *url, cfg)
	if errors.Is(err, serving.ErrNATSAuth) {
		return err // it answered: it runs, and says what to set
	} else if err != nil {
		return fmt.Errorf("%w (is `cluster-serving start` running?)", err)
	}
	defer nc.Close()
	subject := mesh.PredictSubject(cfg.JobName)
	msg := nats.NewMsg(subject)
	msg.Header.Set(mesh.HeaderContentTypeHTTP, mesh.DefaultContentType)
	msg.Data = body
	start := time.Now()
	reply, err := nc.RequestMsg(msg, *timeout)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return fmt.Errorf("nobody serves %s: is `cluster-serving start -c %s` running?", subject, *cfgPath)
		}
		return fmt.Errorf("request %s: %w", subject, err)
	}
	if code := reply.Header.Get("Nats-Service-Error-Code"); code != "" {
		return fmt.Errorf("error %s: %s", code, reply.Header.Get("Nats-Service-Error"))
	}
	fmt.Fprintf(stdout, "%s\n", reply.Data)
	fmt.Fprintf(stderr, "answered in %s\n", time.Since(start).Round(time.Microsecond))
	return nil
}

// fillRequest builds {"instances":[{input: tensor}]} from the model's input
// shapes (batch dimension dropped, other dynamic dimensions set to 1), or
// from shapeFlag for every input.
func fillRequest(cfg *serving.File, value, shapeFlag string) ([]byte, error) {
	if _, err := strconv.ParseFloat(value, 64); err != nil {
		return nil, fmt.Errorf("-fill %q is not a number", value)
	}
	var override []int64
	if shapeFlag != "" {
		for _, d := range strings.Split(shapeFlag, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(d), 10, 64)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("-shape %q is not positive integers separated by commas", shapeFlag)
			}
			override = append(override, n)
		}
	}
	if err := serving.InitRuntime(cfg.OnnxruntimeLib, os.Getenv("ONNXRUNTIME_LIB")); err != nil {
		return nil, err
	}
	key, err := cfg.ModelKey(os.Getenv)
	if err != nil {
		return nil, err
	}
	path, err := defaultModelPath(cfg)
	if err != nil {
		return nil, err
	}
	info, err := serving.ReadInfo(path, key)
	if err != nil {
		return nil, err
	}
	return wire.FillRequest(info, cfg.InputAlreadyBatched, value, override), nil
}

// dial connects a client command to the job's NATS: url when given, else
// the config's natsUrl, else its embedded server's natsListen, with the
// credentials and TLS of the config and the environment (NATSAuth; a
// user:password in the URL wins). file is nil when the command read no
// config: then only the environment's. It returns the URL it used, its
// password redacted, for printing.
func dial(name, url string, file *serving.File) (*nats.Conn, string, error) {
	if file == nil {
		file = &serving.File{} // the environment's credentials only
	}
	if url == "" {
		url = file.NATSURL()
	}
	opts := append([]nats.Option{nats.Name(name)}, file.NATSAuth(os.Getenv).Options()...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, telemetry.RedactURL(url), serving.ConnectError(url, err)
	}
	return nc, telemetry.RedactURL(url), nil
}
