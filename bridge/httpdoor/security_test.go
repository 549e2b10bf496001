package httpdoor_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/telemetry"
	"github.com/cluster-serving/cluster-serving/telemetry/telemetrytest"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	httpdoor "github.com/cluster-serving/cluster-serving/bridge/httpdoor"
	"github.com/cluster-serving/cluster-serving/embedded/tlstest"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// addBody is a valid /predict body for add_f32 (y = 2x + 1).
const addBody = `{"instances":[{"x":[1,2,3,4]}]}`

// debugLogger logs to logs, debug level included, so that a test can look
// for what must not be there.
func debugLogger(logs *telemetrytest.LogBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// tlsClient is an HTTP client with its own connections and tc.
func tlsClient(tc *tls.Config) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
}

// send makes one request with client and returns the status, the
// WWW-Authenticate header and the body; err is the transport's error.
func send(client *http.Client, method, url, token, body string) (int, string, []byte, error) {
	resp, b, err := doortest.Ask(client, method, url, body, "Authorization", token)
	if resp == nil {
		return 0, "", nil, err
	}
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), b, err
}

func TestHTTPSOnly(t *testing.T) {
	infertest.RequireLibrary(t)
	pki := tlstest.New(t, "https")
	e := startDoor(t, httpdoor.Config{Config: door.Config{TLSCertFile: pki.ServerCert, TLSKeyFile: pki.ServerKey}}, served{name: "add", file: "add_f32"})
	if !strings.HasPrefix(e.url, "https://") {
		t.Fatalf("url %s", e.url)
	}
	st, _, body, err := send(tlsClient(pki.ClientTLS(t, false)), "POST", e.url+"/predict", "", addBody)
	if err != nil || st != http.StatusOK || len(predictions(t, body)) != 1 {
		t.Fatalf("https with the CA: got %d %s %v, want 200 and a prediction", st, body, err)
	}
	st, _, body, err = send(tlsClient(&tls.Config{MinVersion: tls.VersionTLS12}), "GET", e.url+"/v2/health/live", "", "")
	if err == nil {
		t.Errorf("https without trusting the CA: got %d %s, want a certificate error", st, body)
	}
	st, _, body, err = send(&http.Client{Timeout: 10 * time.Second}, "POST", "http://"+e.addr+"/predict", "", addBody)
	if err == nil && (st == http.StatusOK || bytes.Contains(body, []byte("predictions"))) {
		t.Errorf("plain http: got %d %s, want a refusal", st, body)
	}
	t.Logf("plain http: %d %q %v", st, body, err)
	old := &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11, RootCAs: pki.Pool()}
	if _, _, _, err := send(tlsClient(old), "GET", e.url+"/v2/health/live", "", ""); err == nil {
		t.Error("TLS 1.1: got an answer, want the handshake refused")
	}
}

func TestMutualTLS(t *testing.T) {
	infertest.RequireLibrary(t)
	pki, other := tlstest.New(t, "mtls"), tlstest.New(t, "other")
	e := startDoor(t, httpdoor.Config{Config: door.Config{TLSCertFile: pki.ServerCert, TLSKeyFile: pki.ServerKey, TLSClientCAFile: pki.CA}},
		served{name: "add", file: "add_f32"})
	foreign := pki.ClientTLS(t, false)
	kp, err := tls.LoadX509KeyPair(other.ClientCert, other.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	foreign.Certificates = []tls.Certificate{kp}
	for _, tc := range []struct {
		name   string
		client *tls.Config
		ok     bool
	}{
		{"no client certificate", pki.ClientTLS(t, false), false},
		{"certificate of another CA", foreign, false},
		{"certificate of the client CA", pki.ClientTLS(t, true), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _, body, err := send(tlsClient(tc.client), "POST", e.url+"/predict", "", addBody)
			switch {
			case tc.ok && (err != nil || st != http.StatusOK):
				t.Errorf("got %d %s %v, want 200", st, body, err)
			case !tc.ok && err == nil:
				t.Errorf("got %d %s, want the handshake refused", st, body)
			}
		})
	}
}

// noSubmit is a Submitter for doors whose tests never reach inference.
type noSubmit struct{}

func (noSubmit) Submit(context.Context, string, mesh.Request) (mesh.Result, error) {
	return mesh.Result{}, errors.New("not reached")
}

var oneModel = []httpdoor.Model{{Name: "m", Job: "m"}}

func TestFileErrorsNameTheField(t *testing.T) {
	pki := tlstest.New(t, "files")
	dir := t.TempDir()
	empty, comments, missing := filepath.Join(dir, "empty"), filepath.Join(dir, "comments"), filepath.Join(dir, "missing")
	doortest.WriteFile(t, empty, "")
	doortest.WriteFile(t, comments, "# only a comment\n\n   \n")
	for _, tc := range []struct {
		name, field string
		cfg         httpdoor.Config
	}{
		{"missing cert", "TLSCertFile", httpdoor.Config{Config: door.Config{TLSCertFile: missing, TLSKeyFile: pki.ServerKey}}},
		{"missing key", "TLSKeyFile", httpdoor.Config{Config: door.Config{TLSCertFile: pki.ServerCert, TLSKeyFile: missing}}},
		{"key of another cert", "TLSCertFile", httpdoor.Config{Config: door.Config{TLSCertFile: pki.ServerCert, TLSKeyFile: pki.ClientKey}}},
		{"cert not PEM", "TLSCertFile", httpdoor.Config{Config: door.Config{TLSCertFile: comments, TLSKeyFile: pki.ServerKey}}},
		{"client CA not PEM", "TLSClientCAFile", httpdoor.Config{Config: door.Config{TLSCertFile: pki.ServerCert, TLSKeyFile: pki.ServerKey, TLSClientCAFile: comments}}},
		{"missing token file", "TokenFile", httpdoor.Config{Config: door.Config{TokenFile: missing}}},
		{"empty token file", "TokenFile", httpdoor.Config{Config: door.Config{TokenFile: empty}}},
		{"token file of comments", "TokenFile", httpdoor.Config{Config: door.Config{TokenFile: comments}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Models = oneModel
			_, err := httpdoor.New(noSubmit{}, tc.cfg)
			var fe *door.FileError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("got %v, want a FileError for %s", err, tc.field)
			}
		})
	}
	_, err := httpdoor.New(noSubmit{}, httpdoor.Config{Config: door.Config{Models: oneModel, TLSCertFile: pki.ServerCert}})
	if !errors.Is(err, httpdoor.ErrInvalidConfig) {
		t.Errorf("cert without key: got %v, want ErrInvalidConfig", err)
	}
}

// serveOn runs a door for cfg on addr and returns its log when it stops.
func serveOn(t *testing.T, addr string, cfg httpdoor.Config) string {
	t.Helper()
	var logs telemetrytest.LogBuffer
	cfg.Models, cfg.Logger = oneModel, debugLogger(&logs)
	door, err := httpdoor.New(noSubmit{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := serveDoor(t, door, addr, false)
	meshtest.WaitFor(t, "the door listening", func() bool { return strings.Contains(logs.String(), "HTTP door listening") })
	e.stop()
	return logs.String()
}

func TestOpenDoorWarning(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	doortest.WriteFile(t, tokens, "s3cret\n")
	pki := tlstest.New(t, "warn")
	for _, tc := range []struct {
		name, addr string
		cfg        httpdoor.Config
		want       int
	}{
		{"all interfaces, no token file", "0.0.0.0:0", httpdoor.Config{}, 1},
		{"all interfaces, TLS but no token file", "0.0.0.0:0", httpdoor.Config{Config: door.Config{TLSCertFile: pki.ServerCert, TLSKeyFile: pki.ServerKey}}, 1},
		{"all interfaces, token file", "0.0.0.0:0", httpdoor.Config{Config: door.Config{TokenFile: tokens}}, 0},
		{"all interfaces, client certificates", "0.0.0.0:0",
			httpdoor.Config{Config: door.Config{TLSCertFile: pki.ServerCert, TLSKeyFile: pki.ServerKey, TLSClientCAFile: pki.CA}}, 0},
		{"loopback", "127.0.0.1:0", httpdoor.Config{}, 0},
		{"loopback v6", "[::1]:0", httpdoor.Config{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.HasPrefix(tc.addr, "[::1]") {
				if ln, err := net.Listen("tcp", tc.addr); err != nil {
					t.Skipf("no IPv6 loopback on this machine: %v", err)
				} else {
					ln.Close()
				}
			}
			logs := serveOn(t, tc.addr, tc.cfg)
			if got := strings.Count(logs, "accepts requests from anyone: set httpAuthTokenFile"); got != tc.want || (got == 1 && !strings.Contains(logs, "HTTP door on 0.0.0.0:")) {
				t.Errorf("got %d warnings, want %d:\n%s", got, tc.want, logs)
			}
		})
	}
}

// countingReader yields n zero bytes and counts how many were read.
type countingReader struct {
	n, read atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	left := c.n.Load() - c.read.Load()
	if left <= 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), left)
	clear(p[:k])
	c.read.Add(k)
	return int(k), nil
}

// TestStatusPage: the page needs no token and holds no data (its script
// allowed by hash alone); its document needs the door's token, and shows
// this door and the 400 it answered, with the job and the message.
func TestStatusPage(t *testing.T) {
	m, err := telemetry.NewMetrics(telemetry.Meter())
	if err != nil {
		t.Fatal(err)
	}
	var e *env
	cfg := httpdoor.Config{Status: func(ctx context.Context) (*mesh.Status, error) {
		js, err := jetstream.New(e.nc)
		if err != nil {
			return nil, err
		}
		return mesh.TakeStatus(ctx, e.nc, js)
	}}
	cfg.Metrics = m
	e, _, _ = tokenDoor(t, cfg)
	stop, err := mesh.RegisterProcess(e.nc, mesh.ProcessConfig{Name: "test", Tally: m.Tally()})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	resp, err := httpClient.Get(e.url + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !bytes.Contains(page, []byte("<script>")) ||
		!strings.Contains(csp, "script-src 'sha256-") || strings.Contains(csp, "unsafe-inline'; connect") {
		t.Fatalf("GET /ui without a token: %d %q CSP %q, want the page, its script allowed by hash", resp.StatusCode, resp.Header.Get("Content-Type"), csp)
	}
	if st, _, _, _ := send(httpClient, "GET", e.url+"/ui/status", "", ""); st != 401 {
		t.Errorf("GET /ui/status without a token: %d, want 401", st)
	}
	if st, _, body, _ := send(httpClient, "POST", e.url+"/predict", "Bearer "+oldToken, `{"instances":[{"x":[1,2]}]}`); st != 400 {
		t.Fatalf("a bad request: %d %s, want 400", st, body)
	}
	st, _, body, err := send(httpClient, "GET", e.url+"/ui/status", "Bearer "+oldToken, "")
	if err != nil || st != 200 {
		t.Fatalf("GET /ui/status: %d %s %v", st, body, err)
	}
	var doc mesh.Status
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("the document: %v\n%s", err, body)
	}
	if len(doc.Doors) != 1 || doc.Doors[0].Door != "http" || doc.Doors[0].Listen != e.url || doc.Doors[0].Outcomes["bad_input"] != 1 {
		t.Errorf("doors %+v: want this HTTP door on %s with its 400", doc.Doors, e.url)
	}
	if len(doc.Errors) != 1 || doc.Errors[0].Status != 400 || doc.Errors[0].Job != "add" || !strings.Contains(doc.Errors[0].Message, `"x"`) {
		t.Errorf("errors %+v: want the 400 of job add naming input x (the page's own 401 is none)", doc.Errors)
	}
	if bytes.Contains(body, []byte(oldToken)) {
		t.Error("the document holds the token")
	}
}
