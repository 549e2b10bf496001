package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// printHowToCall is the banner of `start`: the default model and how to
// call it.
func printHowToCall(w io.Writer, file *serving.File, cfgPath string, node *serving.Node) {
	subject := mesh.PredictSubject(file.JobName)
	info := node.Models()[0].Info
	fmt.Fprintf(w, `
cluster-serving is serving job %q
  model:   %s
  inputs:  %s
  outputs: %s
  NATS:    %s   request-reply subject: %s

Call it from another terminal:
  bin/cluster-serving predict -c %s -fill 0.5%s   # one request, every value 0.5
  bin/cluster-serving predict -c %s -d '{"instances":[{...}]}'
  nats req %s '{"instances":[{...}]}'    # with the nats CLI
  bin/cluster-serving status -c %s       # throughput, queue depth, latency, workers
Stop with Ctrl-C (in-flight work goes back to the queue) or: bin/cluster-serving shutdown -c %s

`, file.JobName, info.Path, serving.FormatIO(info.Inputs), serving.FormatIO(info.Outputs), node.URL(), subject,
		cfgPath, shapeHint(info), cfgPath, subject, cfgPath, cfgPath)
}

// shapeHint suggests -shape when an input has dynamic dimensions besides
// the batch: -fill alone would set them to 1.
func shapeHint(info infer.ModelInfo) string {
	for _, in := range info.Inputs {
		if len(in.Shape) < 2 || !slices.Contains(in.Shape[1:], -1) {
			continue
		}
		dims := make([]string, len(in.Shape)-1)
		for i, d := range in.Shape[1:] {
			dims[i] = strconv.FormatInt(d, 10)
			if d < 0 {
				dims[i] = "N"
			}
		}
		return " -shape " + strings.Join(dims, ",")
	}
	return ""
}

// printOtherModels says where the HTTP door listens and, when there are
// several models, each model's NATS subject and HTTP route.
func printOtherModels(w io.Writer, file *serving.File, models []serving.Model) {
	if httpOn(file) {
		fmt.Fprintf(w, "  HTTP:    http://%s   POST /predict, /v2/models/%s/infer; GET /models, /metrics, /v2/health/ready\n",
			httpAddr(file), models[0].Name)
	}
	if len(models) > 1 {
		for _, m := range models {
			fmt.Fprintf(w, "  model %s version %s: NATS subject %s", m.Name, m.Version, mesh.PredictSubject(m.Job))
			if httpOn(file) {
				fmt.Fprintf(w, ", HTTP /v2/models/%s/versions/%s/infer", m.Name, m.Version)
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w)
}
