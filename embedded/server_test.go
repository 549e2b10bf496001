package embedded_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/embedded"
)

func TestStartJetStreamShutdownTwice(t *testing.T) {
	s, err := embedded.Start(embedded.Config{Port: embedded.RandomPort})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(s.Shutdown)

	for _, tc := range []struct {
		name string
		url  string
		opts []nats.Option
	}{
		{"tcp", s.ClientURL(), nil},
		{"in-process", "", []nats.Option{s.ConnectOption()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := nats.Connect(tc.url, tc.opts...)
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatalf("jetstream.New: %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			name := "T_" + tc.name[:2]
			if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}}); err != nil {
				t.Fatalf("CreateStream: %v", err)
			}
			ack, err := js.Publish(ctx, name+".x", []byte("hi"))
			if err != nil {
				t.Fatalf("Publish: %v", err)
			}
			if got, want := ack.Sequence, uint64(1); got != want {
				t.Errorf("got seq %d, want %d", got, want)
			}
			if got, want := nc.MaxPayload(), int64(embedded.DefaultMaxPayload); got != want {
				t.Errorf("got max payload %d, want %d", got, want)
			}
		})
	}
	s.Shutdown()
	s.Shutdown()
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  embedded.Config
		ok   bool
	}{
		{"zero", embedded.Config{}, true},
		{"random", embedded.Config{Port: -1}, true},
		{"bad port", embedded.Config{Port: 70000}, false},
		{"negative payload", embedded.Config{MaxPayload: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if got := err == nil; got != tc.ok {
				t.Errorf("got valid=%v (%v), want %v", got, err, tc.ok)
			}
			if err != nil && !errors.Is(err, embedded.ErrInvalidConfig) {
				t.Errorf("got %v, want ErrInvalidConfig", err)
			}
		})
	}
}
