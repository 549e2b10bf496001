package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/embedded/tlstest"
)

// plantedToken is the bearer token of the security tests: it must show in
// no output of the process, debug logs included.
const plantedToken = "planted-http-token-5e1f0a"

// secureJob writes a config whose HTTP door serves HTTPS with client
// certificates and bearer tokens, at debug level.
func secureJob(t *testing.T) (cfg, url string, env []string, pki *tlstest.PKI) {
	t.Helper()
	pki = tlstest.New(t, "door")
	tokens := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, tokens, "# ops team\n\n"+plantedToken+"\n", 0o600)
	cfg, url, _, env = testJob(t, fmt.Sprintf("httpTlsCert: %s\nhttpTlsKey: %s\nhttpTlsClientCa: %s\nhttpAuthTokenFile: %s\nlogLevel: debug\n",
		pki.ServerCert, pki.ServerKey, pki.CA, tokens))
	return cfg, url, env, pki
}

// TestStartHTTPSecurity runs `start` with HTTPS, client certificates and
// tokens: the banner's curl line runs as printed (with the real curl,
// TOKEN and the client's files in its environment), plain HTTP, a client
// without a certificate and a request without a token are refused, and
// the token shows nowhere in the output.
func TestStartHTTPSecurity(t *testing.T) {
	skipIfShort(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed: the banner's curl line is run with the real curl")
	}
	cfg, url, env, pki := secureJob(t)
	start := spawn(t, env, "start", "-c", cfg)
	waitReady(t, url, start)
	waitLog(t, start, "Stop with Ctrl-C")
	m := regexp.MustCompile(`curl -s https://(127\.0\.0\.1:\d+)/predict --cacert `).FindStringSubmatch(start.logs())
	if m == nil {
		t.Fatalf("no https curl line with --cacert in\n%s", start.logs())
	}
	runBannerCurls(t, start.logs(), "TOKEN="+plantedToken, "CLIENT_CERT="+pki.ClientCert, "CLIENT_KEY="+pki.ClientKey)
	checkDoorRefuses(t, m[1], pki)
	start.signalAndWait(t, syscall.SIGTERM)
	if strings.Contains(start.logs(), plantedToken) {
		t.Errorf("the output holds the token:\n%s", start.logs())
	}
}

// runBannerCurls runs each curl line of logs through sh with env added:
// each must answer a prediction.
func runBannerCurls(t *testing.T, logs string, env ...string) {
	t.Helper()
	var n int
	for _, line := range strings.Split(logs, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "curl ") {
			continue
		}
		n++
		if !strings.Contains(line, `-H "Authorization: Bearer $TOKEN"`) || !strings.Contains(line, `--cert "$CLIENT_CERT" --key "$CLIENT_KEY"`) {
			t.Errorf("curl line %q: want the client certificate and the token as variables", line)
		}
		cmd := exec.Command("sh", "-c", line)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), `{"predictions":["`) {
			t.Errorf("%s: got %v, %s; want a prediction", line, err, out)
		}
	}
	if n != 1 {
		t.Errorf("ran %d curl lines, want 1", n)
	}
}

// checkDoorRefuses checks the door at addr: plain HTTP, no client
// certificate and no token are refused; the health probes need no token.
func checkDoorRefuses(t *testing.T, addr string, pki *tlstest.PKI) {
	t.Helper()
	get := func(scheme string, tc *tls.Config, path, token string) (int, error) {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
		req, _ := http.NewRequest("GET", scheme+"://"+addr+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	withCert := pki.ClientTLS(t, true)
	for _, tc := range []struct {
		name, scheme, path, token string
		tls                       *tls.Config
		want                      int // 0: no answer
	}{
		{"plain http", "http", "/models", plantedToken, nil, http.StatusBadRequest},
		{"no client certificate", "https", "/models", plantedToken, pki.ClientTLS(t, false), 0},
		{"no token", "https", "/models", "", withCert, http.StatusUnauthorized},
		{"wrong token", "https", "/models", "nope", withCert, http.StatusUnauthorized},
		{"token", "https", "/models", plantedToken, withCert, http.StatusOK},
		{"ready without token", "https", "/v2/health/ready", "", withCert, http.StatusOK},
	} {
		st, err := get(tc.scheme, tc.tls, tc.path, tc.token)
		if st != tc.want {
			t.Errorf("%s: got %d %v, want %d", tc.name, st, err, tc.want)
		}
	}
}

// TestHTTPFileErrorsNameTheKey starts with a TLS or token file the door
// cannot use: the command fails, naming the config key.
func TestHTTPFileErrorsNameTheKey(t *testing.T) {
	skipIfShort(t)
	pki := tlstest.New(t, "bad")
	empty := filepath.Join(t.TempDir(), "empty")
	writeFile(t, empty, "# no token yet\n", 0o600)
	for _, tc := range []struct{ key, extra string }{
		{"httpTlsCert", fmt.Sprintf("httpTlsCert: /nonexistent/cert.pem\nhttpTlsKey: %s\n", pki.ServerKey)},
		{"httpTlsClientCa", fmt.Sprintf("httpTlsCert: %s\nhttpTlsKey: %s\nhttpTlsClientCa: %s\n", pki.ServerCert, pki.ServerKey, empty)},
		{"httpAuthTokenFile", fmt.Sprintf("httpAuthTokenFile: %s\n", empty)},
	} {
		t.Run(tc.key, func(t *testing.T) {
			cfg, _, _, env := testJob(t, tc.extra)
			p := spawn(t, env, "start", "-c", cfg)
			select {
			case <-p.done:
			case <-time.After(60 * time.Second):
				t.Fatal("start did not fail")
			}
			if want := fmt.Sprintf("config key %q", tc.key); p.cmd.ProcessState.ExitCode() == 0 || !strings.Contains(p.logs(), want) {
				t.Errorf("got exit %d and\n%s\nwant a failure naming %s", p.cmd.ProcessState.ExitCode(), p.logs(), want)

			}
		})
	}
}
