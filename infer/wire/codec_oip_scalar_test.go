package wire_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// TestPredictOIPScalarInputs sends an OIP request whose inputs include
// scalars (Clip's lo and hi): it runs as one record, whole, and the next
// request is served too.
func TestPredictOIPScalarInputs(t *testing.T) {
	p := newPredictor(t, infer.Config{ModelPath: model("clip_scalar")})
	body := `{"inputs":[{"name":"x","datatype":"FP32","shape":[2,4],"data":[-1,0.5,2,0.25,0,1,3,-3]},` +
		`{"name":"lo","datatype":"FP32","shape":[],"data":0},{"name":"hi","datatype":"FP32","shape":[],"data":1}]}`
	for range 2 {
		out, err := p.Predict(context.Background(), wire.MediaTypeOIP, []byte(body))
		if err != nil {
			t.Fatalf("Predict: %v", err)
		}
		want := `"shape":[2,4],"data":[0,0.5,1,0.25,0,1,1,0]`
		if !strings.Contains(string(out), want) {
			t.Errorf("got %s, want it to hold %s", out, want)
		}
	}
}
