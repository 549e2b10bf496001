package chaos_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cluster-serving/cluster-serving/mesh/chaos"
)

// testPipeline runs the pipeline rows (chaos.PipelineScenarios) on a
// cluster of their own that serves the diamond ensemble over two_io
// (chaos.UsePipeline): each worker killed with kill -9 while pipelines
// are half done, and the nats-server leading the ensemble's queue. The
// load asks the ensemble on every door; every answer must be 3x + x³ of
// its request's input, once.
func testPipeline(t *testing.T) {
	scenarios := chaos.PipelineScenarios()
	if len(pick(scenarios, *only)) == 0 {
		t.Skipf("-chaos.only %q picks no pipeline row", *only)
	}
	twoIO, err := filepath.Abs("../../infer/testdata/two_io.onnx")
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, false, func(o *chaos.Options) error { return chaos.UsePipeline(o, twoIO) })
	runSuite(t, c, scenarios, chaos.SuiteConfig{})
}

// tableWritten says that this run wrote -chaos.table already: the tables
// of later clusters go after it.
var tableWritten bool

// writeTable writes a cluster's table to -chaos.table: the first of the
// run replaces the file, the others append.
func writeTable(b []byte) error {
	flag := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if tableWritten {
		flag = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	f, err := os.OpenFile(*table, flag, 0o644)
	if err != nil {
		return err
	}
	tableWritten = true
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
