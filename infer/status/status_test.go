package status_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/status"
)

func TestStatus(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, status.OK},
		{"answer", fmt.Errorf("submit: %w", &status.Error{Status: 504, Message: "late"}), 504},
		{"input error", fmt.Errorf("decode: %w", infer.NewInputError(0, "x", "bad")), status.BadInput},
		{"bad input", status.ErrBadInput, status.BadInput},
		{"not found", fmt.Errorf("model: %w", status.ErrNotFound), status.NotFound},
		{"too large", fmt.Errorf("publish: %w", status.ErrTooLarge), status.TooLarge},
		{"too many", status.ErrTooManyRequests, status.TooManyRequests},
		{"busy", status.ErrBusy, status.Busy},
		{"engine queue full", fmt.Errorf("infer: %w", infer.ErrQueueFull), status.Busy},
		{"engine closed", infer.ErrClosed, status.Busy},
		{"image budget", fmt.Errorf("decode: %w", infer.ErrImageBudget), status.Busy},
		{"timeout", status.ErrTimeout, status.Timeout},
		{"deadline", fmt.Errorf("wait: %w", context.DeadlineExceeded), status.Timeout},
		{"canceled", context.Canceled, status.ClientClosed},
		{"other", errors.New("boom"), status.Internal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := status.Of(tt.err); got != tt.want {
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
		{400, status.ErrBadInput},
		{403, status.ErrForbidden},
		{404, status.ErrNotFound},
		{413, status.ErrTooLarge},
		{429, status.ErrTooManyRequests},
		{503, status.ErrBusy},
		{504, status.ErrTimeout},
	}
	for _, tt := range tests {
		err := fmt.Errorf("mesh: %w", &status.Error{Status: tt.status, Message: "m"})
		if !errors.Is(err, tt.want) {
			t.Errorf("status %d: errors.Is(%v, %v) is false, want true", tt.status, err, tt.want)
		}
		if got := status.Of(err); got != tt.status {
			t.Errorf("status %d: Status: got %d", tt.status, got)
		}
	}
	if err := (&status.Error{Status: 500, Message: "m"}); errors.Unwrap(err) != nil {
		t.Errorf("status 500: Unwrap: got %v, want nil", errors.Unwrap(err))
	}
	if got, want := (&status.Error{Status: 400, Message: "no"}).Error(), "status 400: no"; got != want {
		t.Errorf("Error(): got %q, want %q", got, want)
	}
}
