package httpdoor_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	httpdoor "github.com/cluster-serving/cluster-serving/bridge/httpdoor"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// panickySubmitter panics on a body starting with "panic" and answers
// the others with their body.
type panickySubmitter struct{}

func (panickySubmitter) Submit(_ context.Context, _ string, req mesh.Request) (mesh.Result, error) {
	if strings.HasPrefix(string(req.Body), "panic") {
		panic("submitter bug")
	}
	return mesh.Result{Status: 200, Body: req.Body}, nil
}

// TestDoorRecoversPanic checks that a panic while handling one request
// answers it 500 {"error":...} and the door serves the next.
func TestDoorRecoversPanic(t *testing.T) {
	door, err := httpdoor.New(panickySubmitter{}, httpdoor.Config{Config: door.Config{Models: []httpdoor.Model{{Name: "m", Job: "m"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(door.Handler())
	t.Cleanup(ts.Close)
	tests := []struct {
		body string
		want int
	}{{"panic-1", http.StatusInternalServerError}, {`{"instances":[1]}`, http.StatusOK}}
	for _, tt := range tests {
		resp, err := http.Post(ts.URL+"/predict", "application/json", strings.NewReader(tt.body))
		if err != nil {
			t.Fatalf("%s: %v", tt.body, err)
		}
		var answer map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&answer)
		_ = resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("%s: got status %d, want %d", tt.body, resp.StatusCode, tt.want)
		}
		if tt.want == 500 && !strings.Contains(answer["error"].(string), "submitter bug") {
			t.Errorf("%s: got answer %v, want an error naming the panic", tt.body, answer)
		}
	}
}
