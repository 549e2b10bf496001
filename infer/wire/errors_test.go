package wire_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

func TestStatus(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, wire.StatusOK},
		{"answer", fmt.Errorf("submit: %w", &wire.Error{Status: 504, Message: "late"}), 504},
		{"input error", fmt.Errorf("decode: %w", infer.NewInputError(0, "x", "bad")), wire.StatusBadInput},
		{"bad input", wire.ErrBadInput, wire.StatusBadInput},
		{"not found", fmt.Errorf("model: %w", wire.ErrNotFound), wire.StatusNotFound},
		{"too large", fmt.Errorf("publish: %w", wire.ErrTooLarge), wire.StatusTooLarge},
		{"too many", wire.ErrTooManyRequests, wire.StatusTooManyRequests},
		{"busy", wire.ErrBusy, wire.StatusBusy},
		{"engine queue full", fmt.Errorf("infer: %w", infer.ErrQueueFull), wire.StatusBusy},
		{"engine closed", infer.ErrClosed, wire.StatusBusy},
		{"timeout", wire.ErrTimeout, wire.StatusTimeout},
		{"deadline", fmt.Errorf("wait: %w", context.DeadlineExceeded), wire.StatusTimeout},
		{"canceled", context.Canceled, wire.StatusClientClosed},
		{"other", errors.New("boom"), wire.StatusInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wire.Status(tt.err); got != tt.want {
				t.Errorf("Status(%v): got %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

func TestErrorUnwrapsToItsSentinel(t *testing.T) {
	tests := []struct {
		status int
		want   error
	}{
		{400, wire.ErrBadInput},
		{404, wire.ErrNotFound},
		{413, wire.ErrTooLarge},
		{429, wire.ErrTooManyRequests},
		{503, wire.ErrBusy},
		{504, wire.ErrTimeout},
	}
	for _, tt := range tests {
		err := fmt.Errorf("mesh: %w", &wire.Error{Status: tt.status, Message: "m"})
		if !errors.Is(err, tt.want) {
			t.Errorf("status %d: errors.Is(%v, %v) is false, want true", tt.status, err, tt.want)
		}
		if got := wire.Status(err); got != tt.status {
			t.Errorf("status %d: Status: got %d", tt.status, got)
		}
	}
	if err := (&wire.Error{Status: 500, Message: "m"}); errors.Unwrap(err) != nil {
		t.Errorf("status 500: Unwrap: got %v, want nil", errors.Unwrap(err))
	}
	if got, want := (&wire.Error{Status: 400, Message: "no"}).Error(), "status 400: no"; got != want {
		t.Errorf("Error(): got %q, want %q", got, want)
	}
}
