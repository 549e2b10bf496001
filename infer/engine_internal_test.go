package infer

import (
	"strings"
	"testing"
)

// TestNewRecoversPanic makes loading panic and checks New turns it into a
// load error, and that the next load works.
func TestNewRecoversPanic(t *testing.T) {
	orig := newSession
	t.Cleanup(func() { newSession = orig })
	newSession = func(string, []byte, int, string, bool) (*Session, error) { panic("boom") }
	cfg := Config{ModelPath: "testdata/add_f32.onnx"}
	e, err := New(cfg)
	if e != nil || err == nil || !strings.Contains(err.Error(), "panic: boom") {
		t.Fatalf("New: got %v, %v, want a load error naming the panic", e, err)
	}
}
