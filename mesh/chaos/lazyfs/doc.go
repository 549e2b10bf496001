// Package lazyfs is a FUSE loopback file system that loses what was not
// fsynced, as a machine does when its power goes: Jepsen's LazyFS, for the
// fault suite. It mounts a backing directory at a mount point and passes
// every operation through, while it remembers, for each file written since
// its last fsync, the content that fsync made durable. PowerCut throws the
// rest away.
//
// The rules PowerCut applies, as the page cache of a journaling file system
// (ext4 with data=ordered) would lose it:
//
//   - A regular file's content and size go back to what they were at its
//     last fsync or fdatasync, through any descriptor of that file, or at
//     the mount for a file that was there before and not written since. A
//     write through a descriptor opened with O_SYNC or O_DSYNC counts as
//     written and fsynced at once, as nats-server's sync_interval: always
//     relies on for its index files. Truncation and fallocate are reverted
//     like writes.
//   - A file created on the mount and never fsynced keeps its name and
//     becomes empty: the zero-length file that applications which rename
//     without fsync find after a crash.
//   - Names are durable at once: create, mkdir, rename, link, symlink,
//     unlink and rmdir are never undone, as if every directory operation
//     were committed to the journal before it returned. fsync on a
//     directory is therefore a no-op. Content follows the inode through a
//     rename: a file renamed over another keeps its own synced content.
//   - Attributes (mode, owner, times, xattrs) are never undone.
//
// fsync does not reach the backing file: the backing directory stands for
// the disk, and its own durability is not under test. Writes go through to
// it at once; the content last synced is kept as the pages a write or a
// truncation overwrote (a 4 KiB undo log per file, in memory), so a file
// written only by appends costs nothing but its size.
//
// Options.Capacity (and SetCapacity at run time) bound the bytes the file
// system holds, the sum of its regular files' sizes: a write that would
// grow it past the bound fails whole with ENOSPC, so a full disk can be
// simulated and then relieved.
//
// It is test-only and Linux-only. Mounting needs /dev/fuse and, unless
// fusermount is installed, root; Mount wraps any failure to mount in
// ErrNoFUSE so that tests can skip where the kernel cannot serve them.
package lazyfs
