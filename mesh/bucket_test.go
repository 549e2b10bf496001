package mesh_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// TestResultBucket keeps results by uri, lists and deletes them, and
// drops a result put again with its message id after it was deleted: a
// result delivered twice does not come back once read.
func TestResultBucket(t *testing.T) {
	s := meshtest.StartServer(t)
	c, err := mesh.NewClient(meshtest.Connect(t, s), mesh.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b, err := c.ResultBucket(ctx, "job", mesh.StreamConfig{Storage: jetstream.MemoryStorage}, 0)
	if err != nil {
		t.Fatal(err)
	}
	uris := []string{"a", "dir/x y.jpg", "é\x00\n", strings.Repeat("z", mesh.MaxBucketURIBytes)}
	for i, u := range uris {
		if err := b.Put(ctx, u, []byte("v"+u), "id"+string(rune('0'+i))); err != nil {
			t.Fatalf("Put %q: %v", u, err)
		}
	}
	got, err := b.URIs(ctx)
	if err != nil || len(got) != len(uris) {
		t.Fatalf("URIs: got %q, %v, want %q", got, err, uris)
	}
	for _, u := range uris {
		if v, ok, err := b.Get(ctx, u); err != nil || !ok || string(v) != "v"+u {
			t.Errorf("Get %.20q: got %.20q, %v, %v", u, v, ok, err)
		}
	}
	if ok, err := b.Delete(ctx, "a"); err != nil || !ok {
		t.Fatalf("Delete: got %v, %v, want true", ok, err)
	}
	if ok, _ := b.Delete(ctx, "a"); ok {
		t.Error("Delete of a deleted result: got true")
	}
	if err := b.Put(ctx, "a", []byte("again"), "id0"); err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := b.Get(ctx, "a"); ok {
		t.Errorf("the result put again with its id after Delete: got %q, want it dropped", v)
	}
	if err := b.Put(ctx, "a", []byte("new"), "id9"); err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := b.Get(ctx, "a"); !ok || string(v) != "new" {
		t.Errorf("a new result of the uri: got %q, %v", v, ok)
	}
	for _, u := range []string{"", strings.Repeat("z", mesh.MaxBucketURIBytes+1)} {
		if err := b.Put(ctx, u, nil, ""); !errors.Is(err, mesh.ErrBucketURI) {
			t.Errorf("Put of a %d-byte uri: got %v, want ErrBucketURI", len(u), err)
		}
	}
}

// TestBucketKey pins the encoding: [A-Za-z0-9_-] as they are, other
// bytes =XX.
func TestBucketKey(t *testing.T) {
	for uri, want := range map[string]string{"cat1": "cat1", "cat 1.jpg": "cat=201=2Ejpg", "a/b=c": "a=2Fb=3Dc", "\xff": "=FF"} {
		got, err := mesh.BucketKey(uri)
		if err != nil || got != want {
			t.Errorf("BucketKey(%q): got %q, %v, want %q", uri, got, err, want)
		}
	}
	for _, key := range []string{"", "a=2", "a=2e", "=41", "a.b", "=zz"} {
		if uri, err := mesh.URIOfBucketKey(key); err == nil {
			t.Errorf("URIOfBucketKey(%q): got %q, want an error", key, uri)
		}
	}
}

// FuzzBucketKey: every uri BucketKey takes comes back from its key, and
// every key is one a KV bucket accepts.
func FuzzBucketKey(f *testing.F) {
	for _, s := range []string{"a", "cat 1.jpg", "\x00", "=41", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		key, err := mesh.BucketKey(uri)
		if err != nil {
			if uri != "" && len(uri) <= mesh.MaxBucketURIBytes {
				t.Fatalf("BucketKey(%q): %v", uri, err)
			}
			return
		}
		for i := 0; i < len(key); i++ {
			c := key[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '=') {
				t.Fatalf("BucketKey(%q) = %q: byte %q is no KV key byte", uri, key, c)
			}
		}
		back, err := mesh.URIOfBucketKey(key)
		if err != nil || back != uri {
			t.Fatalf("URIOfBucketKey(BucketKey(%q)) = %q, %v", uri, back, err)
		}
	})
}

// TestResultBucketWatch: with Watch running, results put and deleted by
// another process's handle of the bucket are found and forgotten through
// the index, and a uri is listed only once Get finds it.
func TestResultBucketWatch(t *testing.T) {
	s := meshtest.StartServer(t)
	open := func() *mesh.ResultBucket {
		c, err := mesh.NewClient(meshtest.Connect(t, s), mesh.ClientConfig{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		b, err := c.ResultBucket(context.Background(), "job", mesh.StreamConfig{Storage: jetstream.MemoryStorage}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ctx := context.Background()
	watched, other := open(), open()
	if err := other.Put(ctx, "before", []byte("1"), "m1"); err != nil {
		t.Fatal(err)
	}
	meshtest.Run(t, watched.Watch)
	if err := other.Put(ctx, "after", []byte("2"), "m2"); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"before", "after"} {
		meshtest.WaitFor(t, u, func() bool { _, ok, _ := watched.Get(ctx, u); return ok })
	}
	if uris, err := watched.URIs(ctx); err != nil || len(uris) != 2 {
		t.Errorf("URIs: got %q, %v, want before and after", uris, err)
	}
	if ok, err := other.Delete(ctx, "after"); !ok || err != nil {
		t.Fatalf("Delete: %v, %v", ok, err)
	}
	meshtest.WaitFor(t, "the delete", func() bool { _, ok, _ := watched.Get(ctx, "after"); return !ok })
	// A value this process put and keeps gives way to a newer one put
	// by another process.
	if err := watched.Put(ctx, "mine", []byte("old"), "m3"); err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := watched.Get(ctx, "mine"); !ok || string(v) != "old" {
		t.Fatalf("Get of its own put: got %q, %v", v, ok)
	}
	if err := other.Put(ctx, "mine", []byte("new"), "m4"); err != nil {
		t.Fatal(err)
	}
	meshtest.WaitFor(t, "the newer value", func() bool { v, _, _ := watched.Get(ctx, "mine"); return string(v) == "new" })
	if v, ok, err := watched.Get(ctx, "never"); ok || err != nil {
		t.Errorf("Get of a uri never put: got %q, %v, %v", v, ok, err)
	}
}
