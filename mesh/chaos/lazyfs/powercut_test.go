package lazyfs_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cluster-serving/cluster-serving/mesh/chaos/lazyfs"
)

// absent marks a file that must not exist after the power cut.
var absent = []byte("<absent>")

// powerCase is one case of TestPowerCut: operations on the mount, then
// the content each named file must have after the power cut.
type powerCase struct {
	name string
	run  func(t *testing.T, dir string)
	want map[string][]byte
}

// bigA and bigB are contents that span pages.
var bigA, bigB = pattern('a', 10000), pattern('b', 5000)

var powerCases = []powerCase{
	{"synced write survives", func(t *testing.T, d string) {
		write(t, filepath.Join(d, "f"), 0, bigA, true)
	}, map[string][]byte{"f": bigA}},
	{"unsynced new file is empty", func(t *testing.T, d string) {
		write(t, filepath.Join(d, "f"), 0, bigA, false)
	}, map[string][]byte{"f": {}}},
	{"append after sync is dropped", func(t *testing.T, d string) {
		write(t, filepath.Join(d, "f"), 0, bigA, true)
		write(t, filepath.Join(d, "f"), int64(len(bigA)), bigB, false)
	}, map[string][]byte{"f": bigA}},
	{"overwrite across pages is undone", func(t *testing.T, d string) {
		write(t, filepath.Join(d, "f"), 0, bigA, true)
		write(t, filepath.Join(d, "f"), 3000, bigB, false)
	}, map[string][]byte{"f": bigA}},
	{"second sync keeps both writes", func(t *testing.T, d string) {
		write(t, filepath.Join(d, "f"), 0, bigA, true)
		write(t, filepath.Join(d, "f"), 3000, bigB, true)
		write(t, filepath.Join(d, "f"), 0, bigB, false)
	}, map[string][]byte{"f": splice(bigA, 3000, bigB)}},
	{"truncate after sync is undone", func(t *testing.T, d string) {
		write(t, filepath.Join(d, "f"), 0, bigA, true)
		check(t, os.Truncate(filepath.Join(d, "f"), 100))
		write(t, filepath.Join(d, "f"), 8000, bigB, false)
	}, map[string][]byte{"f": bigA}},
	{"fdatasync counts", func(t *testing.T, d string) {
		write(t, filepath.Join(d, "f"), 0, bigA, false)
		f, err := os.OpenFile(filepath.Join(d, "f"), os.O_RDONLY, 0)
		check(t, err)
		defer f.Close()
		check(t, unix.Fdatasync(int(f.Fd())))
	}, map[string][]byte{"f": bigA}},
	{"O_SYNC write survives", func(t *testing.T, d string) {
		f, err := os.OpenFile(filepath.Join(d, "f"), os.O_CREATE|os.O_WRONLY|os.O_SYNC, 0o644)
		check(t, err)
		defer f.Close()
		_, err = f.Write(bigA)
		check(t, err)
	}, map[string][]byte{"f": bigA}},
	{"fsync through another descriptor", func(t *testing.T, d string) {
		w, err := os.Create(filepath.Join(d, "f"))
		check(t, err)
		defer w.Close()
		_, err = w.Write(bigA)
		check(t, err)
		r, err := os.Open(filepath.Join(d, "f"))
		check(t, err)
		defer r.Close()
		check(t, r.Sync())
	}, map[string][]byte{"f": bigA}},
	{"rename of a synced file keeps its content", func(t *testing.T, d string) {
		write(t, filepath.Join(d, "final"), 0, bigB, true)
		write(t, filepath.Join(d, "tmp"), 0, bigA, true)
		check(t, os.Rename(filepath.Join(d, "tmp"), filepath.Join(d, "final")))
	}, map[string][]byte{"final": bigA, "tmp": absent}},
	{"rename of an unsynced file leaves it empty", func(t *testing.T, d string) {
		write(t, filepath.Join(d, "final"), 0, bigB, true)
		write(t, filepath.Join(d, "tmp"), 0, bigA, false)
		check(t, os.Rename(filepath.Join(d, "tmp"), filepath.Join(d, "final")))
	}, map[string][]byte{"final": {}, "tmp": absent}},
	{"unlink is durable", func(t *testing.T, d string) {
		write(t, filepath.Join(d, "f"), 0, bigA, true)
		write(t, filepath.Join(d, "g"), 0, bigA, false)
		check(t, os.Remove(filepath.Join(d, "f")))
		check(t, os.Remove(filepath.Join(d, "g")))
	}, map[string][]byte{"f": absent, "g": absent}},
	{"hard links share one file", func(t *testing.T, d string) {
		write(t, filepath.Join(d, "f"), 0, bigA, false)
		check(t, os.Link(filepath.Join(d, "f"), filepath.Join(d, "g")))
		write(t, filepath.Join(d, "g"), 0, bigB, true)
		write(t, filepath.Join(d, "f"), 0, pattern('c', 20000), false)
	}, map[string][]byte{"f": splice(bigA, 0, bigB), "g": splice(bigA, 0, bigB)}},
	{"mkdir is durable", func(t *testing.T, d string) {
		check(t, os.Mkdir(filepath.Join(d, "sub"), 0o755))
		write(t, filepath.Join(d, "sub", "f"), 0, bigA, true)
	}, map[string][]byte{"sub/f": bigA}},
}

// TestPowerCut runs each case's operations on a fresh mount, cuts the
// power and compares every named file's content, read back through the
// mount, with what the rules of the package comment keep.
func TestPowerCut(t *testing.T) {
	for _, tc := range powerCases {
		t.Run(tc.name, func(t *testing.T) {
			fsys := mount(t, lazyfs.Options{})
			tc.run(t, fsys.Mountpoint())
			for name := range tc.want {
				// Fill the kernel's page cache, which PowerCut must drop.
				_, _ = os.ReadFile(filepath.Join(fsys.Mountpoint(), name))
			}
			if _, err := fsys.PowerCut(); err != nil {
				t.Fatalf("PowerCut: %v", err)
			}
			for name, want := range tc.want {
				got, err := os.ReadFile(filepath.Join(fsys.Mountpoint(), name))
				if os.IsNotExist(err) {
					got = absent
				} else if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s: got %s, want %s (first difference at byte %d)", name, describe(got), describe(want), firstDiff(got, want))
				}
			}
		})
	}
}

// describe abbreviates content for a failure message.
func describe(b []byte) string {
	if bytes.Equal(b, absent) {
		return "no file"
	}
	if len(b) > 16 {
		return fmt.Sprintf("%q... (%d bytes)", b[:16], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// firstDiff is the offset of the first byte where a and b differ.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestPowerCutPreexisting: files in the backing directory before the
// mount count as synced; an unsynced overwrite of one is undone.
func TestPowerCutPreexisting(t *testing.T) {
	backing := t.TempDir()
	old := pattern('o', 9000)
	check(t, os.WriteFile(filepath.Join(backing, "f"), old, 0o644))
	fsys := lazyfs.MountForTest(t, backing, lazyfs.Options{})
	write(t, filepath.Join(fsys.Mountpoint(), "f"), 4000, pattern('n', 9000), false)
	if _, err := fsys.PowerCut(); err != nil {
		t.Fatalf("PowerCut: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(fsys.Mountpoint(), "f"))
	check(t, err)
	if !bytes.Equal(got, old) {
		t.Errorf("got %s, want the content from before the mount", describe(got))
	}
}

// TestUnsynced: Unsynced counts distinct unsynced bytes, fsync clears a
// file's count, and PowerCut reports the count it dropped.
func TestUnsynced(t *testing.T) {
	fsys := mount(t, lazyfs.Options{})
	f := filepath.Join(fsys.Mountpoint(), "f")
	g := filepath.Join(fsys.Mountpoint(), "g")
	write(t, f, 0, pattern('a', 100), false)
	write(t, f, 50, pattern('b', 60), false) // 10 new bytes
	write(t, g, 0, pattern('c', 1000), true)
	write(t, g, 2000, pattern('d', 5), false)
	if got, want := fsys.Unsynced(), int64(115); got != want {
		t.Errorf("Unsynced: got %d, want %d", got, want)
	}
	h, err := os.Open(f)
	check(t, err)
	check(t, h.Sync())
	h.Close()
	if got, want := fsys.Unsynced(), int64(5); got != want {
		t.Errorf("Unsynced after fsync of f: got %d, want %d", got, want)
	}
	dropped, err := fsys.PowerCut()
	if err != nil || dropped != 5 {
		t.Errorf("PowerCut: got %d, %v; want 5, nil", dropped, err)
	}
	if got := fsys.Unsynced(); got != 0 {
		t.Errorf("Unsynced after PowerCut: got %d, want 0", got)
	}
	var st syscall.Stat_t
	check(t, syscall.Stat(g, &st))
	if st.Size != 1000 {
		t.Errorf("g after PowerCut: got size %d, want 1000", st.Size)
	}
}
