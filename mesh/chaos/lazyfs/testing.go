package lazyfs

import (
	"errors"
	"testing"
)

// MountForTest mounts backing on a new temp dir of tb, or skips the test
// when the kernel cannot serve FUSE here (ErrNoFUSE): a missing kernel
// feature, not a missing dependency, so even CLUSTER_SERVING_REQUIRE_DEPS=1
// skips. It unmounts at cleanup, before the temp dirs go.
func MountForTest(tb testing.TB, backing string, opts Options) *FS {
	tb.Helper()
	mnt := tb.TempDir()
	fsys, err := Mount(backing, mnt, opts)
	if errors.Is(err, ErrNoFUSE) {
		tb.Skipf("FUSE cannot be mounted here (needs /dev/fuse and root or fusermount): %v", err)
	}
	if err != nil {
		tb.Fatalf("Mount: %v", err)
	}
	tb.Cleanup(func() {
		if err := fsys.Unmount(); err != nil {
			tb.Errorf("Unmount: %v", err)
		}
	})
	return fsys
}
