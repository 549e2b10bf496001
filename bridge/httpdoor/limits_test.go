package httpdoor_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	httpdoor "github.com/cluster-serving/cluster-serving/bridge/httpdoor"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// TestBodyOverLimitEveryRoute sends a body over MaxBodyBytes to every
// route that takes one, sized and chunked, and to routes that take none:
// each answers 413 with the JSON error body.
func TestBodyOverLimitEveryRoute(t *testing.T) {
	infertest.RequireLibrary(t)
	const limit = 100
	e := startDoor(t, httpdoor.Config{MaxBodyBytes: limit}, served{name: "add", file: "add_f32"})
	if st, body := call(t, "POST", e.url+"/predict", addBody); st != 200 {
		t.Fatalf("under the limit: got %d %s", st, body)
	}
	big := `{"instances":[{"x":[` + strings.Repeat("1,", 200) + `1]}]}`
	bodyRoutes := []string{"/predict", "/models/add/versions/1/predict", "/v2/models/add/infer", "/v2/models/add/versions/1/infer"}
	type route struct {
		method, path string
		chunked      bool
	}
	var routes []route
	for _, p := range bodyRoutes {
		routes = append(routes, route{"POST", p, false}, route{"POST", p, true})
	}
	routes = append(routes, route{"POST", "/v2/models/nope/infer", false}, route{"POST", "/nope", false},
		route{"PUT", "/predict", false}, route{"GET", "/models", false})
	for _, r := range routes {
		t.Run(r.method+" "+r.path+map[bool]string{true: " chunked"}[r.chunked], func(t *testing.T) {
			var body io.Reader = strings.NewReader(big)
			if r.chunked {
				body = io.MultiReader(body) // hides the length: sent chunked
			}
			req, err := http.NewRequest(r.method, e.url+r.path, body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := httpClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Fatalf("got %d %s, want 413", resp.StatusCode, b)
			}
			if msg := errorOf(t, b); !strings.Contains(msg, "httpMaxBodyBytes") {
				t.Errorf("got %q, want it to name httpMaxBodyBytes", msg)
			}
		})
	}
}

// TestUnauthenticatedBodyNotRead sends 1 GiB without a token: the door
// answers 401 without reading it.
func TestUnauthenticatedBodyNotRead(t *testing.T) {
	e, _, _ := tokenDoor(t, httpdoor.Config{MaxBodyBytes: 2 << 30})
	src := &countingReader{}
	src.n.Store(1 << 30)
	req, err := http.NewRequest("POST", e.url+"/predict", src)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 1 << 30
	start := time.Now()
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("after %d bytes sent: %v", src.read.Load(), err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnauthorized || !bytes.Contains(b, []byte(`"error"`)) {
		t.Fatalf("got %d %s, want 401", resp.StatusCode, b)
	}
	t.Logf("401 after %v, %d bytes of 1 GiB sent", time.Since(start), src.read.Load())
	if sent := src.read.Load(); sent > 64<<20 {
		t.Errorf("the client sent %d bytes before the 401: want the body left unread", sent)
	}
}
