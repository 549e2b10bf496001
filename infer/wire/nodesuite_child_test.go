package wire_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest/onnxnode"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// This file is the child side of TestONNXNodeSuite (nodesuite_test.go): a
// SIGFPE or SIGSEGV inside ONNX Runtime's C++ code ends the whole process,
// which no recover can stop, so the cases run in a child process (this test
// binary, re-executed) that reports each case as it goes; the parent names
// the case a child died in and starts a new child after it.

// TestMain runs the binary as a node-suite child when the parent asked
// for one, else runs the tests.
func TestMain(m *testing.M) {
	if onnxnode.IsChild() {
		os.Exit(nodeChild())
	}
	os.Exit(m.Run())
}

// nodeResult is what a child reports of one case.
type nodeResult struct {
	Case   string `json:"case"`
	Load   string `json:"load,omitempty"`   // infer.New's error
	Build  string `json:"build,omitempty"`  // the request could not be built from the test data
	Status int    `json:"status,omitempty"` // the answer's wire status
	Msg    string `json:"msg,omitempty"`    // the error message of a non-200 answer
	Match  string `json:"match,omitempty"`  // 200 only: "" when the outputs match, else how they differ
	Panic  string `json:"panic,omitempty"`  // a panic that escaped infer.New or Predict
	Death  string `json:"-"`                // set by the parent: how the child died in this case
}

// nodeChild initialises ONNX Runtime and runs the cases onnxnode.Child
// hands it.
func nodeChild() int {
	lib, err := infer.FindLibrary("", os.Getenv("ONNXRUNTIME_LIB"))
	if err == nil {
		err = infer.Init(lib)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ONNX Runtime:", err)
		return 3
	}
	return onnxnode.Child(func(dir string) any { return runNodeCase(dir) })
}

// runNodeCase loads the case's model the way a worker does (infer.New,
// then a wire.Predictor in front) and sends one OIP request built from
// test_data_set_0/input_*.pb.
func runNodeCase(dir string) (r nodeResult) {
	r.Case = filepath.Base(dir)
	e, err := loadGuarded(filepath.Join(dir, "model.onnx"), &r)
	if err != nil || r.Panic != "" {
		if err != nil {
			r.Load = err.Error()
		}
		return r
	}
	defer e.Close()
	body, err := onnxnode.OIPRequest(dir, e.Info().Inputs)
	if err != nil {
		r.Build = err.Error()
		return r
	}
	p := wire.NewPredictor(e, wire.Model{})
	out, err := predictGuarded(p, body, &r)
	if r.Panic != "" {
		return r
	}
	r.Status = status.Of(err)
	if err != nil {
		r.Msg = err.Error()
		return r
	}
	r.Match = onnxnode.CompareOIP(dir, out)
	return r
}

func loadGuarded(model string, r *nodeResult) (e *infer.Engine, err error) {
	defer func() {
		if p := recover(); p != nil {
			r.Panic = fmt.Sprintf("infer.New: %v\n%s", p, debug.Stack())
		}
	}()
	return infer.New(infer.Config{ModelPath: model})
}

func predictGuarded(p *wire.Predictor, body []byte, r *nodeResult) (out []byte, err error) {
	defer func() {
		if x := recover(); x != nil {
			r.Panic = fmt.Sprintf("Predict: %v\n%s", x, debug.Stack())
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return p.Predict(ctx, wire.MediaTypeOIP, body)
}
