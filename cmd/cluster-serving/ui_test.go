package main

// The status page at /ui, in a real headless Chromium (Debian's chromium)
// against a real start with two models, a token file and a second worker.

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/cluster-serving/cluster-serving/embedded/tlstest"
)

// pageView is what the rendered page shows, read from its DOM.
type pageView struct {
	Rows    int // rows of #jobs and #workers
	Text    string
	Total   string
	Workers []struct{ ID, Job, PID string }
	Jobs    []pageJob
	Errors  []struct{ Status, Message string }
}

// pageJob is the text of a row of #jobs.
type pageJob struct{ Job, Rate, Pending, Inflight string }

const readPage = `(() => {
  const all = (q) => [...document.querySelectorAll(q)], cell = (r, c) => (r.querySelector(c) || {}).textContent;
  return {
    rows: all("#jobs tbody tr, #workers tbody tr").length,
    text: document.body.innerText,
    total: document.getElementById("total-rate").textContent,
    workers: all("#workers tr[data-worker]").map((r) => ({id: r.dataset.worker, job: cell(r, ".job"), pid: cell(r, ".pid")})),
    jobs: all("#jobs tr[data-job]").map((r) => ({job: r.dataset.job, rate: cell(r, ".rate"), pending: cell(r, ".pending"), inflight: cell(r, ".inflight")})),
    errors: all("#errors tbody tr").map((r) => ({status: cell(r, ".status"), message: cell(r, ".message")})),
  };
})()`

// waitPage reads the page until cond holds, for up to 30 s, and fails the
// test with the last view if it never does.
func waitPage(t *testing.T, ctx context.Context, what string, cond func(pageView) bool) pageView {
	t.Helper()
	var v pageView
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		v, err = chromedp.Run(ctx, chromedp.Evaluate[pageView](readPage))
		if err != nil {
			t.Fatalf("read the page: %v", err)
		}
		if cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page never showed %s; it shows:\n%s", what, v.Text)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// uiMesh starts `start` with two models, a token file and HTTPS (its CA
// trusted by uiClient), and a second worker; it returns the door's URL, the token, the NATS URL and the
// first model's job.
func uiMesh(t *testing.T) (base, token, url, job string) {
	t.Helper()
	requireORT(t)
	dir := t.TempDir()
	ports := freePorts(t, 2)
	add, _ := filepath.Abs("../../infer/testdata/add_f32.onnx")
	cls, _ := filepath.Abs("../../infer/testdata/classifier.onnx")
	pki := tlstest.New(t, "ui") // the page over HTTPS, as in production
	uiClient.Transport = &http.Transport{TLSClientConfig: pki.ClientTLS(t, false)}
	token = "ui-test-token-" + strconv.Itoa(ports[0])
	tokens := writeFile(t, filepath.Join(dir, "tokens"), token+"\n", 0o600)
	job = "u" + strconv.Itoa(ports[0])
	cfg := writeFile(t, filepath.Join(dir, "config.yaml"), fmt.Sprintf("jobName: %s\nmodels:\n  - {name: add, path: %s}\n"+
		"  - {name: cls, version: \"2\", path: %s}\nnatsListen: 127.0.0.1:%d\nnatsStoreDir: %s\nthreadPerModel: 1\n"+
		"httpInterface: 127.0.0.1\nhttpPort: %d\nhttpAuthTokenFile: %s\nhttpTlsCert: %s\nhttpTlsKey: %s\nmetricsListen: off\n",
		job, add, cls, ports[0], filepath.Join(dir, "js"), ports[1], tokens, pki.ServerCert, pki.ServerKey), 0o644)
	env := []string{"XDG_RUNTIME_DIR=" + dir}
	url = fmt.Sprintf("nats://127.0.0.1:%d", ports[0])
	start := spawn(t, env, "start", "-c", cfg)
	waitReady(t, url, start)
	waitLog(t, spawn(t, env, "worker", "-c", cfg, "-nats", url), "joined")
	return fmt.Sprintf("https://127.0.0.1:%d", ports[1]), token, url, job
}

// TestStatusPageInChromium drives the status page in headless Chromium:
// without a token a login prompt and no data, a wrong token refused, then
// with the token both workers of the first job, a throughput that moves,
// the queue depth and the forced 400 in the last errors. The document
// behind it matches `status -json -once`.
func TestStatusPageInChromium(t *testing.T) {
	skipIfShort(t)
	chromium := requireChromium(t)
	base, token, natsURL, job := uiMesh(t)
	trickle(t, base, token)
	st, want400, err := post(base, token, `{"instances":[{"x":[1,2,3]}]}`)
	if err != nil || st != http.StatusBadRequest || want400 == "" {
		t.Fatalf("forced bad input: got %d %q %v, want 400 with a message", st, want400, err)
	}
	if st, body := getStatus(t, base, ""); st != http.StatusUnauthorized || !strings.Contains(string(body), `"error"`) {
		t.Errorf("GET /ui/status without token: got %d %s, want 401 with a JSON error", st, body)
	}

	ctx := newBrowser(t, chromium)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui"), chromedp.WaitVisible(chromedp.CSS("#login"))); err != nil {
		t.Fatalf("open /ui: %v", err)
	}
	v := waitPage(t, ctx, "the login prompt", func(v pageView) bool { return true })
	if v.Rows != 0 || strings.Contains(v.Text, job) {
		t.Errorf("without a token: got %d rows and text\n%s\nwant a login prompt and no data", v.Rows, v.Text)
	}
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#token"), "not-the-token"), chromedp.Click(chromedp.CSS("#login button")),
		chromedp.WaitVisible(chromedp.CSS("#login-message"))); err != nil {
		t.Fatalf("a wrong token: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#login button"))); err != nil {
		t.Fatalf("sign in: %v", err)
	}

	waitPage(t, ctx, "two workers of "+job+" in two processes", func(v pageView) bool {
		var pids []string
		for _, w := range v.Workers {
			if w.Job == job && !slices.Contains(pids, w.PID) {
				pids = append(pids, w.PID)
			}
		}
		return len(pids) == 2
	})
	first := waitPage(t, ctx, "a throughput above zero for "+job, func(v pageView) bool { return rateOf(v, job) > 0 })
	waitPage(t, ctx, "a throughput that changes", func(v pageView) bool { return v.Total != first.Total && rateOf(v, job) > 0 })
	waitPage(t, ctx, "the queue depth of "+job, func(v pageView) bool {
		i := slices.IndexFunc(v.Jobs, func(j pageJob) bool { return j.Job == job })
		if i < 0 {
			return false
		}
		_, e1 := strconv.Atoi(strings.ReplaceAll(v.Jobs[i].Pending, ",", ""))
		_, e2 := strconv.Atoi(strings.ReplaceAll(v.Jobs[i].Inflight, ",", ""))
		return e1 == nil && e2 == nil
	})
	waitPage(t, ctx, "the forced 400 in the last errors", func(v pageView) bool {
		return slices.ContainsFunc(v.Errors, func(e struct{ Status, Message string }) bool {
			// The document may shorten a long message, ending it with "…".
			shown := strings.TrimSuffix(e.Message, "…")
			return e.Status == "400" && len(shown) >= min(40, len(want400)) && strings.HasPrefix(want400, shown)
		})
	})
	saveScreenshot(t, ctx)
	compareWithCLI(t, base, token, natsURL)
}

// rateOf reads the job's req/s cell of v, -1 when absent.
func rateOf(v pageView, job string) float64 {
	for _, j := range v.Jobs {
		if j.Job == job {
			r, err := strconv.ParseFloat(strings.TrimSuffix(j.Rate, " req/s"), 64)
			if err == nil {
				return r
			}
		}
	}
	return -1
}
