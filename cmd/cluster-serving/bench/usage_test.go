package bench

import (
	"strings"
	"testing"
	"time"
)

func TestParseUsage(t *testing.T) {
	const text = `# HELP cluster_serving_batch_size Records per inference batch.
# TYPE cluster_serving_batch_size histogram
cluster_serving_batch_size_bucket{job_name="j",le="1"} 2
cluster_serving_batch_size_sum{job_name="j",model="m"} 30
cluster_serving_batch_size_count{job_name="j",model="m"} 4
cluster_serving_stage_duration_seconds_sum{job_name="j",stage="infer"} 1.5
cluster_serving_stage_duration_seconds_count{job_name="j",stage="infer"} 4
cluster_serving_stage_duration_seconds_sum{job_name="j",stage="decode"} 0.25
cluster_serving_stage_duration_seconds_sum{job_name="j",stage="queue_wait"} 0.5
cluster_serving_stage_duration_seconds_sum{job_name="j",stage="encode"} 9
go_memstats_mallocs_total 123
`
	var u usage
	if err := parseUsage(strings.NewReader(text), &u); err != nil {
		t.Fatal(err)
	}
	want := usage{batches: 4, rows: 30, busy: 1500 * time.Millisecond, decode: 250 * time.Millisecond, queueWait: 500 * time.Millisecond}
	if u != want {
		t.Errorf("got %+v, want %+v", u, want)
	}
}
