package lazyfs_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/cluster-serving/cluster-serving/mesh/chaos/lazyfs"
)

// mount mounts a lazyfs backed by a new temp dir (lazyfs.MountForTest).
func mount(t testing.TB, opts lazyfs.Options) *lazyfs.FS {
	t.Helper()
	return lazyfs.MountForTest(t, t.TempDir(), opts)
}

// write writes data at off in the file at path, creating it, and fsyncs
// it when sync is set. It closes the file: PowerCut comes after the
// writer died.
func write(t testing.TB, path string, off int64, data []byte, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatalf("fsync: %v", err)
		}
	}
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// pattern is n bytes of c, spanning pages when n > 4096.
func pattern(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }

// splice is base with patch written at off.
func splice(base []byte, off int, patch []byte) []byte {
	out := append([]byte(nil), base...)
	return append(out[:off], append(patch, out[min(len(out), off+len(patch)):]...)...)
}
