package mesh_test

import (
	"context"
	"errors"
	"fmt"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/mesh"
)

// oddURIs are uris NATS headers would change, and plain ones that must
// stay readable.
var oddURIs = []string{
	"plain-1", "a b", "with:colon", "100%", "", " lead", "trail ", "x\r\ny", "tab\there", "\n",
	"non-utf8 \xff\xfe", "ünïcode", "nul\x00byte", mesh.URIEncodedPrefix + "abc",
	mesh.URIEncodedPrefix, strings.Repeat("u", mesh.MaxURIBytes), strings.Repeat("\t", mesh.MaxURIBytes),
}

func TestEncodeURI(t *testing.T) {
	for _, uri := range oddURIs {
		enc := mesh.EncodeURI(uri)
		checkHeaderSafe(t, uri, enc)
		got, err := mesh.DecodeURI(enc)
		if err != nil || got != uri {
			t.Errorf("DecodeURI(EncodeURI(%q)) = %q, %v; want %q", uri, got, err, uri)
		}
	}
	// Plain uris stay readable in headers.
	for _, uri := range []string{"plain-1", "a b", "with:colon", "100%", "img/cat.jpg?x=1"} {
		if got := mesh.EncodeURI(uri); got != uri {
			t.Errorf("EncodeURI(%q) = %q, want it unchanged", uri, got)
		}
	}
	if _, err := mesh.DecodeURI(mesh.URIEncodedPrefix + "!!"); err == nil {
		t.Errorf("DecodeURI of a corrupt value: got no error, want one")
	}
}

// checkHeaderSafe fails unless enc is a header value nats.go carries as
// it is: no CR or LF, nothing textproto.TrimString would trim, printable
// ASCII, and no longer than the limit's encoding.
func checkHeaderSafe(tb testing.TB, uri, enc string) {
	tb.Helper()
	if textproto.TrimString(enc) != enc {
		tb.Errorf("EncodeURI(%q) = %q: trimmed by a NATS header", uri, enc)
	}
	for i := 0; i < len(enc); i++ {
		if enc[i] < 0x20 || enc[i] > 0x7e {
			tb.Fatalf("EncodeURI(%q) = %q: byte %#x at %d is not printable ASCII", uri, enc, enc[i], i)
		}
	}
	if max := len(mesh.URIEncodedPrefix) + (4*len(uri)+2)/3; len(enc) > max {
		tb.Errorf("EncodeURI(%q): %d bytes, want at most %d", uri, len(enc), max)
	}
}

// FuzzURI checks that every byte string survives EncodeURI and DecodeURI,
// as a header-safe value, and that DecodeURI never panics.
func FuzzURI(f *testing.F) {
	for _, uri := range oddURIs {
		f.Add(uri)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		enc := mesh.EncodeURI(uri)
		checkHeaderSafe(t, uri, enc)
		if got, err := mesh.DecodeURI(enc); err != nil || got != uri {
			t.Fatalf("DecodeURI(EncodeURI(%q)) = %q, %v", uri, got, err)
		}
		_, _ = mesh.DecodeURI(uri) // any header value: an error, not a panic
	})
}

// TestURIByteExactThroughTheMesh sends odd uris through a real server and
// worker, on both publish paths, and wants each result under exactly its uri.
func TestURIByteExactThroughTheMesh(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sc := mesh.StreamConfig{Job: "uris", Storage: jetstream.MemoryStorage}
	_, nc := startStreams(t, sc)
	got := collectResults(t, nc, "uris", "redis")
	runWorker(t, nc, mesh.WorkerConfig{Stream: sc}, newFake())
	c := newClient(t, nc)

	want := map[string]bool{}
	for i, uri := range oddURIs {
		if uri == "" {
			continue
		}
		res, err := c.Submit(ctx, "uris", mesh.Request{URI: uri, Body: []byte(fmt.Sprint("b", i))})
		if err != nil || res.URI != uri {
			t.Errorf("Submit: got uri %q, %v; want %q", res.URI, err, uri)
		}
		err = c.Enqueue(ctx, "uris", mesh.Request{URI: uri, Body: []byte(fmt.Sprint("e", i))}, mesh.ResultsSubject("uris", "redis"))
		if err != nil {
			t.Fatalf("Enqueue %q: %v", uri, err)
		}
		want[uri] = true
	}
	for len(want) > 0 {
		select {
		case r := <-got:
			if !want[r.URI] {
				t.Fatalf("got a result under uri %q, want one of the uris sent", r.URI)
			}
			delete(want, r.URI)
		case <-ctx.Done():
			t.Fatalf("timed out; no result for %q", keys(want))
		}
	}
}

func keys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestURITooLong: a uri over MaxURIBytes is refused before publishing,
// with 413 and the limit named; a header NATS itself refuses as too large
// (API error 10097) is a 413 too, never a retry.
func TestURITooLong(t *testing.T) {
	_, nc := startStreams(t, mesh.StreamConfig{Job: "long", Storage: jetstream.MemoryStorage})
	c := newClient(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	subj := mesh.ResultsSubject("long", "redis")
	long := strings.Repeat("u", mesh.MaxURIBytes+1)
	err := c.Enqueue(ctx, "long", mesh.Request{URI: long, Body: []byte("x")}, subj)
	if !errors.Is(err, mesh.ErrURITooLong) || status.Of(err) != status.TooLarge || !strings.Contains(err.Error(), "8192") {
		t.Errorf("Enqueue: got %v (status %d), want ErrURITooLong naming 8192, status 413", err, status.Of(err))
	}
	if _, err := c.Submit(ctx, "long", mesh.Request{URI: long, Body: []byte("x")}); !errors.Is(err, mesh.ErrURITooLong) {
		t.Errorf("Submit: got %v, want ErrURITooLong", err)
	}
	big := nats.Header{"X-Big": []string{strings.Repeat("h", 70<<10)}}
	err = c.Enqueue(ctx, "long", mesh.Request{URI: "ok", Body: []byte("x"), Header: big}, subj)
	if status.Of(err) != status.TooLarge {
		t.Errorf("Enqueue with a 70 KiB header: got %v (status %d), want 413", err, status.Of(err))
	}
	if err := c.Enqueue(ctx, "long", mesh.Request{URI: strings.Repeat("\n", mesh.MaxURIBytes), Body: []byte("x")}, subj); err != nil {
		t.Errorf("Enqueue of a uri at the limit: %v", err)
	}
}
