package door_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/cluster-serving/cluster-serving/bridge/door"
)

// controlled is a catalog that can load and unload.
type controlled struct{ catalog }

func (controlled) Load(context.Context, string) error   { return nil }
func (controlled) Unload(context.Context, string) error { return nil }

func TestControlOf(t *testing.T) {
	if door.ControlOf(nil) != nil || door.ControlOf(catalog{}) != nil {
		t.Error("ControlOf of no catalog or one without Load and Unload: got a Control, want nil")
	}
	if door.ControlOf(controlled{}) == nil {
		t.Error("ControlOf of a catalog with Load and Unload: got nil, want it")
	}
}

// TestControlError: a *status.Error or ctx's error passes as it is; any
// other becomes a 503 naming the operation and the model.
func TestControlError(t *testing.T) {
	notFound := status.Errorf(status.NotFound, "unknown model %q", "m")
	for _, tc := range []struct {
		err    error
		status int
		msg    string
	}{
		{nil, status.OK, ""},
		{notFound, status.NotFound, `unknown model "m"`},
		{fmt.Errorf("wrapped: %w", context.Canceled), status.ClientClosed, "client closed the request"},
		{errors.New("repository: not running"), status.Busy, `load model "m": repository: not running`},
	} {
		err := door.ControlError("load", "m", tc.err)
		if status.Of(err) != tc.status || (err != nil && door.Message(err) != tc.msg) {
			t.Errorf("ControlError(%v): got %d %v, want %d %q", tc.err, status.Of(err), err, tc.status, tc.msg)
		}
	}
}

func TestUnsupportedParameters(t *testing.T) {
	for _, tc := range []struct {
		names, known []string
		want         string // "" for nil
	}{
		{nil, nil, ""},
		{[]string{"unload_dependents"}, []string{"unload_dependents"}, ""},
		{[]string{"file:1/model.onnx", "config", "unload_dependents"}, []string{"unload_dependents"},
			"unsupported parameters config, file:1/model.onnx: models load from the repository directory as they are"},
	} {
		err := door.UnsupportedParameters(tc.names, tc.known...)
		if (tc.want == "" && err != nil) || (tc.want != "" && (err == nil || door.Message(err) != tc.want || status.Of(err) != status.BadInput)) {
			t.Errorf("UnsupportedParameters(%v, %v): got %v, want %q", tc.names, tc.known, err, tc.want)
		}
	}
	if err := door.OneRepository(""); err != nil {
		t.Errorf("OneRepository(\"\"): got %v, want nil", err)
	}
	if err := door.OneRepository("x"); status.Of(err) != status.BadInput {
		t.Errorf("OneRepository(\"x\"): got %v, want a 400", err)
	}
}
