package main

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// TestGRPCConfigKeys: grpcPort 0 (the default) leaves the door off; set,
// it listens on httpInterface and takes the HTTP door's shared keys.
func TestGRPCConfigKeys(t *testing.T) {
	file, err := serving.ParseFile(serving.Template("m"))
	if err != nil || grpcOn(file) {
		t.Fatalf("template: got on %v (%v), want the gRPC door off", grpcOn(file), err)
	}
	file, err = serving.ParseFile([]byte("modelPath: m\nhttpInterface: 127.0.0.1\ngrpcPort: 9001\nhttpRequestTimeout: 1500\n" +
		"httpMaxBodyBytes: 1024\nhttpTlsCert: c.pem\nhttpTlsKey: k.pem\nhttpTlsClientCa: ca.pem\nhttpAuthTokenFile: t\n" +
		"tokenBucketEnabled: true\ntokensPerSecond: 7\ntokenAcquireTimeout: 250\n" +
		"httpIdleTimeout: 5000\nhttpReadTimeout: 6000\nhttpWriteTimeout: 7000\nhttpMaxConnections: 9\n"))
	if err != nil {
		t.Fatal(err)
	}
	gc := grpcConfig(file, httpConfig(file, file.ServedModels()))
	if !grpcOn(file) || gc.Addr != "127.0.0.1:9001" || gc.RequestTimeout != 1500*time.Millisecond || gc.MaxRecvBytes != 1024 ||
		gc.TLSCertFile != "c.pem" || gc.TLSKeyFile != "k.pem" || gc.TLSClientCAFile != "ca.pem" || gc.TokenFile != "t" || len(gc.Models) != 1 ||
		gc.TokensPerSecond != 7 || gc.TokenAcquireTimeout != 250*time.Millisecond ||
		gc.Conns != (door.Conns{IdleTimeout: 5 * time.Second, ReadTimeout: 6 * time.Second, WriteTimeout: 7 * time.Second, MaxConnections: 9}) {
		t.Errorf("keys: got %+v", gc)
	}
	for _, bad := range []string{"grpcPort: -1\n", "grpcPort: 70000\n", "httpPort: 9000\ngrpcPort: 9000\n"} {
		if _, err := serving.ParseFile([]byte("modelPath: m\n" + bad)); err == nil || !strings.Contains(err.Error(), "grpcPort") {
			t.Errorf("%q: got %v, want an error naming grpcPort", bad, err)
		}
	}
}

// TestStartServesGRPC runs `cluster-serving start` with grpcPort set and
// calls the door as a KServe client would; the banner shows the grpcurl
// line.
func TestStartServesGRPC(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 3)
	port, hp, gp := ports[0], ports[1], ports[2]
	add, _ := filepath.Abs("../../infer/testdata/add_f32.onnx")
	requireORT(t)
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf("jobName: g%d\nmodels:\n  - {name: add, path: %s}\n"+
		"natsListen: 127.0.0.1:%d\nnatsStoreDir: %s\nthreadPerModel: 1\nhttpInterface: 127.0.0.1\nhttpPort: %d\ngrpcPort: %d\n",
		port, add, port, filepath.Join(dir, "js"), hp, gp)
	writeFile(t, cfgPath, cfg, 0o644)
	p := spawn(t, []string{"XDG_RUNTIME_DIR=" + dir}, "start", "-c", cfgPath)
	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", gp), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := kservepb.NewGRPCInferenceServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waitProc(t, p, 60*time.Second, "ServerReady true", func() bool {
		r, err := c.ServerReady(ctx, &kservepb.ServerReadyRequest{})
		return err == nil && r.Ready
	})
	resp, err := c.ModelInfer(ctx, &kservepb.ModelInferRequest{ModelName: "add", Inputs: []*kservepb.ModelInferRequest_InferInputTensor{
		{Name: "x", Datatype: "FP32", Shape: []int64{1, 4}, Contents: &kservepb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4}}}}})
	if err != nil || len(resp.Outputs) != 1 || !reflect.DeepEqual(resp.Outputs[0].Contents.GetFp32Contents(), []float32{3, 5, 7, 9}) {
		t.Errorf("ModelInfer: got %v %v, want y [3 5 7 9]", resp, err)
	}
	want := fmt.Sprintf("grpcurl -plaintext 127.0.0.1:%d list", gp)
	waitProc(t, p, 30*time.Second, "the banner's grpcurl line", func() bool { return strings.Contains(p.logs(), want) })
	p.signalAndWait(t, syscall.SIGTERM)
}
