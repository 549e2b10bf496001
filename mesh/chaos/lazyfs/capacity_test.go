package lazyfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cluster-serving/cluster-serving/mesh/chaos/lazyfs"
)

// TestCapacity: a write past the capacity fails with ENOSPC and changes
// nothing, writes within the size the file system holds still work,
// statfs reports the capacity, and raising the capacity or removing a
// file relieves the disk.
func TestCapacity(t *testing.T) {
	const capacity = 64 << 10
	fsys := mount(t, lazyfs.Options{Capacity: capacity})
	dir := fsys.Mountpoint()
	write(t, filepath.Join(dir, "a"), 0, pattern('a', 60<<10), false)
	if got, want := fsys.Used(), int64(60<<10); got != want {
		t.Errorf("Used: got %d, want %d", got, want)
	}
	var sfs syscall.Statfs_t
	check(t, syscall.Statfs(dir, &sfs))
	if got, want := int64(sfs.Blocks)*sfs.Frsize, int64(capacity); got != want {
		t.Errorf("statfs size: got %d, want %d", got, want)
	}
	if got, want := int64(sfs.Bavail)*sfs.Frsize, int64(4<<10); got != want {
		t.Errorf("statfs available: got %d, want %d", got, want)
	}

	f, err := os.OpenFile(filepath.Join(dir, "b"), os.O_CREATE|os.O_WRONLY, 0o644)
	check(t, err)
	defer f.Close()
	if _, err := f.Write(pattern('b', 8<<10)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past the capacity: got %v, want ENOSPC", err)
	}
	if got, want := fsys.Used(), int64(60<<10); got != want {
		t.Errorf("Used after the failed write: got %d, want %d", got, want)
	}
	write(t, filepath.Join(dir, "a"), 0, pattern('x', 60<<10), false) // an overwrite needs no space

	check(t, fsys.SetCapacity(128<<10))
	if _, err := f.Write(pattern('b', 8<<10)); err != nil {
		t.Fatalf("write after SetCapacity: %v", err)
	}
	check(t, fsys.SetCapacity(capacity))
	if _, err := f.Write(pattern('b', 8<<10)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write after lowering the capacity again: got %v, want ENOSPC", err)
	}
	check(t, os.Remove(filepath.Join(dir, "a")))
	if _, err := f.Write(pattern('b', 8<<10)); err != nil {
		t.Fatalf("write after removing a file: %v", err)
	}
	if got, want := fsys.Used(), int64(16<<10); got != want {
		t.Errorf("Used: got %d, want %d", got, want)
	}
	check(t, fsys.SetCapacity(0))
	if _, err := f.Write(pattern('b', 1<<20)); err != nil {
		t.Fatalf("write with no capacity: %v", err)
	}
}

// TestOptionsValidate: a negative capacity is refused, naming the field,
// and a mount point that is not there is an error of the caller, not a
// missing kernel feature.
func TestOptionsValidate(t *testing.T) {
	err := lazyfs.Options{Capacity: -1}.Validate()
	if !errors.Is(err, lazyfs.ErrInvalidOptions) {
		t.Errorf("Validate: got %v, want ErrInvalidOptions", err)
	}
	if _, err := lazyfs.Mount(t.TempDir(), t.TempDir(), lazyfs.Options{Capacity: -1}); !errors.Is(err, lazyfs.ErrInvalidOptions) {
		t.Errorf("Mount: got %v, want ErrInvalidOptions", err)
	}
	_, err = lazyfs.Mount(t.TempDir(), filepath.Join(t.TempDir(), "missing"), lazyfs.Options{})
	if err == nil || errors.Is(err, lazyfs.ErrNoFUSE) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Mount on a missing mount point: got %v, want os.ErrNotExist", err)
	}
}
