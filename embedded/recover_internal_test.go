package embedded

import "testing"

// TestResourceError feeds the lines nats-server writes for a latched
// write error: only those of a resource that comes back by itself may
// restart JetStream.
func TestResourceError(t *testing.T) {
	for _, tc := range []struct {
		name, format string
		args         []any
		want         bool
	}{
		{"fds", "Filestore [S] Critical write error: %v", []any{
			`error opening msg block file ["/s/msgs/1.blk"]: open /s/msgs/1.blk: too many open files`}, true},
		{"fds in system", "Filestore [S] Critical write error: %v", []any{"open /s/msgs/index.db: too many open files in system"}, true},
		{"disk", "Filestore [S] Critical write error: %v", []any{"write /s/msgs/2.blk: no space left on device"}, true},
		{"quota", "Filestore [S] Critical write error: %v", []any{"write /s/msgs/2.blk: disk quota exceeded"}, true},
		{"permission", "Filestore [S] Critical write error: %v", []any{"open /s/msgs/index.db: permission denied"}, false},
		{"io", "Filestore [S] Critical write error: %v", []any{"write /s/msgs/2.blk: input/output error"}, false},
		{"other line", "JetStream failed to store a msg on stream '%s > %s': %v", []any{"$G", "S", "too many open files"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := criticalWriteError(tc.format, tc.args); got != tc.want {
				t.Errorf("criticalWriteError(%q, %q): got %v, want %v", tc.format, tc.args, got, tc.want)
			}
		})
	}
}
