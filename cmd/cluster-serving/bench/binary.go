package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// The binary paths of the bench: the same image as imageRequest's JSON,
// carried as raw float32 bytes (gRPC raw_input_contents, the OIP binary
// tensor extension over HTTP) or as the original's Arrow tensor struct
// (the Redis door).

// imageTensor is one 1×3×h×w float32 image of 0–255 values, the numbers
// of imageRequest.
func imageTensor(h, w int) infer.Tensor {
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]float32, 3*h*w)
	for i := range data {
		data[i] = float32(r.IntN(256))
	}
	return infer.Tensor{DType: infer.Float32, Shape: []int64{1, 3, int64(h), int64(w)}, Data: data}
}

// grpcOp calls ModelInfer on the gRPC door at addr with t as the one
// input name of model, in raw_input_contents, over a few connections.
func grpcOp(addr, model, name string, t infer.Tensor) (op, func(), error) {
	return grpcOpConns(addr, model, name, t, 4)
}

// grpcOpConns is grpcOp over conns connections.
func grpcOpConns(addr, model, name string, t infer.Tensor, conns int) (op, func(), error) {
	clients, req, closeAll, err := grpcClients(addr, model, name, t, conns)
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, g int) error {
		// The run's deadline is not the request's: passed on as
		// grpc-timeout, the door would answer DeadlineExceeded a moment
		// before the run ends, and the callers would count those as
		// errors while their own context is still live. Cancelled at the
		// run's end, the call ends as the other doors' do.
		call, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		resp, err := clients[g%conns].ModelInfer(call, req)
		if err == nil && len(resp.Outputs) == 0 {
			err = fmt.Errorf("ModelInfer answered no outputs")
		}
		return err
	}, closeAll, nil
}

// grpcStreamOp sends the same request as grpcOp on ModelStreamInfer: each
// caller opens one stream (on connection g%4) at its first call and
// sends its requests on it one after the other, as Triton's streaming
// clients do; conc bounds the callers.
func grpcStreamOp(addr, model, name string, t infer.Tensor, conc int) (op, func(), error) {
	const conns = 4
	clients, req, closeAll, err := grpcClients(addr, model, name, t, conns)
	if err != nil {
		return nil, nil, err
	}
	streams := make([]grpc.BidiStreamingClient[kservepb.ModelInferRequest, kservepb.ModelStreamInferResponse], conc)
	return func(_ context.Context, g int) error {
		if streams[g] == nil { // only caller g uses streams[g]
			s, err := clients[g%conns].ModelStreamInfer(context.Background())
			if err != nil {
				return err
			}
			streams[g] = s
		}
		if err := streams[g].Send(req); err != nil {
			streams[g] = nil
			return err
		}
		resp, err := streams[g].Recv()
		switch {
		case err != nil:
			streams[g] = nil
			return err
		case resp.ErrorMessage != "":
			return fmt.Errorf("ModelStreamInfer: %s", resp.ErrorMessage)
		}
		return nil
	}, closeAll, nil
}

// grpcClients opens conns connections to the gRPC door at addr and the
// request of t as the one input name of model, in raw_input_contents.
func grpcClients(addr, model, name string, t infer.Tensor, conns int) ([]kservepb.GRPCInferenceServiceClient, *kservepb.ModelInferRequest, func(), error) {
	clients := make([]kservepb.GRPCInferenceServiceClient, 0, conns)
	ccs := make([]*grpc.ClientConn, 0, conns)
	closeAll := func() {
		for _, cc := range ccs {
			cc.Close()
		}
	}
	for range conns {
		cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			closeAll()
			return nil, nil, nil, err
		}
		ccs = append(ccs, cc)
		clients = append(clients, kservepb.NewGRPCInferenceServiceClient(cc))
	}
	// Marshalling one message from many goroutines is safe: it is only read.
	req := &kservepb.ModelInferRequest{
		ModelName:        model,
		Inputs:           []*kservepb.ModelInferRequest_InferInputTensor{{Name: name, Datatype: wire.OIPDatatype(t.DType), Shape: t.Shape}},
		RawInputContents: [][]byte{wire.AppendRaw(nil, t)},
	}
	return clients, req, closeAll, nil
}

// oipBinaryRequest is an OIP request with the binary tensor data
// extension: its JSON header, then t's raw bytes; it asks for the outputs
// as raw bytes too. headerLen is the header's length, for
// Inference-Header-Content-Length.
func oipBinaryRequest(name string, t infer.Tensor) (body []byte, headerLen int, err error) {
	raw := wire.AppendRaw(nil, t)
	type params struct {
		BinaryDataSize   int  `json:"binary_data_size,omitempty"`
		BinaryDataOutput bool `json:"binary_data_output,omitempty"`
	}
	type input struct {
		Name       string  `json:"name"`
		Shape      []int64 `json:"shape"`
		Datatype   string  `json:"datatype"`
		Parameters params  `json:"parameters"`
	}
	header, err := json.Marshal(struct {
		Inputs     []input `json:"inputs"`
		Parameters params  `json:"parameters"`
	}{
		Inputs:     []input{{Name: name, Shape: t.Shape, Datatype: wire.OIPDatatype(t.DType), Parameters: params{BinaryDataSize: len(raw)}}},
		Parameters: params{BinaryDataOutput: true},
	})
	if err != nil {
		return nil, 0, err
	}
	return append(header, raw...), len(header), nil
}

// oipBinaryOp POSTs the binary OIP request of t to the HTTP door's
// /v2/models/<model>/infer.
func oipBinaryOp(httpURL, model, name string, t infer.Tensor, conc int) (op, error) {
	body, headerLen, err := oipBinaryRequest(name, t)
	if err != nil {
		return nil, err
	}
	h := http.Header{
		"Content-Type":                    {"application/octet-stream"},
		wire.HeaderInferenceContentLength: {strconv.Itoa(headerLen)},
	}
	return httpOpHeader(httpURL+"/v2/models/"+model+"/infer", h, body, conc), nil
}

// arrowRecord is t without its batch dimension as the data field of a
// Redis entry in the original's format: a base64 Arrow IPC stream of one
// record batch whose column name is a tensor struct {indiceData,
// indiceShape, data, shape} of 4 rows, row i filling only field i (what
// its Python client writes for a dense ndarray; see
// infer/testdata/fixtures/payloads/ndarray-128-base64).
func arrowRecord(name string, t infer.Tensor) ([]byte, error) {
	shape := make([]int32, 0, len(t.Shape)-1)
	for _, d := range t.Shape[1:] {
		shape = append(shape, int32(d))
	}
	col := wire.DenseTensorColumn(t.Data.([]float32), shape)
	defer col.Release()
	return wire.EncodeArrowRecord([]string{name}, col)
}
