package embedded

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSyncPolicy checks when the store fsyncs: every write by default,
// the interval Sync names, and the config file's sync_interval over both.
func TestSyncPolicy(t *testing.T) {
	file := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(file, []byte("jetstream { sync_interval: 10s }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		cfg      Config
		always   bool
		interval time.Duration
	}{
		{"default", Config{}, true, 0},
		{"always", Config{Sync: SyncAlways}, true, 0},
		{"interval", Config{Sync: "2m"}, false, 2 * time.Minute},
		{"file wins", Config{Sync: SyncAlways, ConfigFile: file}, false, 10 * time.Second},
	}
	for _, tt := range tests {
		opts, err := options(tt.cfg.withDefaults(), "")
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if opts.SyncAlways != tt.always || (!tt.always && opts.SyncInterval != tt.interval) {
			t.Errorf("%s: got always %v interval %v, want %v %v", tt.name, opts.SyncAlways, opts.SyncInterval, tt.always, tt.interval)
		}
	}
	for _, bad := range []string{"sometimes", "0s", "-1m"} {
		if err := (Config{Sync: bad}).Validate(); err == nil {
			t.Errorf("Sync %q: got no error", bad)
		}
	}
}
