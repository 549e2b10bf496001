package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// wide is a one-step ensemble without a batch dim of its own over two_io
// (which batches): its tensors are [N,3] for any N, so that a request of
// many rows makes an intermediate tensor as large as one likes.
const wide = `name: "wide" platform: "ensemble" max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1, 3 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1, 3 ] } ]
ensemble_scheduling { step [ { model_name: "two_io" input_map { key: "a" value: "IN" } input_map { key: "b" value: "IN" }
  output_map { key: "prod" value: "OUT" } } ] }`

// TestIntermediateBeyondMaxPayload runs a request whose body, step
// request, step answer and answer are each larger than what travels in a
// message (the NATS server's max_payload, 96 KiB here, less 64 KiB kept
// for headers): they travel beside their messages (mesh.BodiesBucket)
// and the answer is right.
func TestIntermediateBeyondMaxPayload(t *testing.T) {
	c := serveRepo(t, 96<<10, map[string]string{"wide": wide})
	const rows = 12000 // 144 KB of FP32 per tensor
	var b strings.Builder
	fmt.Fprintf(&b, `{"inputs":[{"name":"IN","datatype":"FP32","shape":[%d,3],"data":[`, rows)
	for i := range rows * 3 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, i%7)
	}
	b.WriteString(`]}]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.Submit(ctx, "p-wide", mesh.Request{ContentType: wire.MediaTypeOIP, Body: []byte(b.String())})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Body) < 32<<10 { // what travels inline: max_payload less 64 KiB for headers
		t.Fatalf("answer of %d bytes: want it past max_payload", len(res.Body))
	}
	// OUT = IN*IN: the first row is 0, 1, 4.
	if !strings.Contains(string(res.Body), `"shape":[12000,3]`) || !bytes.Contains(res.Body, []byte(`"data":[0,1,4,9,16,25,36,0,1`)) {
		t.Errorf("answer starts %.300s", res.Body)
	}
}

// TestNoBatchEnsembleTakesInstances sends JSON instances, whose codec
// cuts the leading dim off each, to an ensemble without a batch dim of
// its own (wide: [-1,3]): each instance runs with a dim of 1, as a model
// that does not batch runs it.
func TestNoBatchEnsembleTakesInstances(t *testing.T) {
	c := serveRepo(t, 0, map[string]string{"wide": wide})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.Submit(ctx, "p-wide", mesh.Request{ContentType: wire.MediaTypeJSON, Body: []byte(`{"instances":[{"IN":[1,2,3]},{"IN":[-1,0,4]}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	// OUT = IN*IN.
	for _, want := range []string{`[1,4,9]`, `[1,0,16]`} {
		if !strings.Contains(string(res.Body), want) {
			t.Errorf("answer %s lacks %s", res.Body, want)
		}
	}
}
