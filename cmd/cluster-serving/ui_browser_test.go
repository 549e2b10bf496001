package main

// The headless browser of the status page's test: Debian's chromium,
// driven through chromedp.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// requireChromium returns Debian's chromium, or fails or skips the test
// (infertest.Missing) when it is not installed.
func requireChromium(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		infertest.Missing(t, "chromium not found ("+err.Error()+"): apt-get install chromium")
	}
	return path
}

// newBrowser starts headless chromium and returns a tab's context; the
// browser ends at cleanup.
func newBrowser(t *testing.T, chromium string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1400, 1000),
		chromedp.Flag("ignore-certificate-errors", true)) // the test's own CA
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start %s: %v", chromium, err)
	}
	return ctx
}

// saveScreenshot writes the page to docs/images/status-page.png with
// CLUSTER_SERVING_UPDATE_SCREENSHOT=1, else to the test's temp dir.
func saveScreenshot(t *testing.T, ctx context.Context) {
	t.Helper()
	update := os.Getenv("CLUSTER_SERVING_UPDATE_SCREENSHOT") == "1"
	if update { // the docs' picture: a minute of history in the charts
		const filled = `(JSON.parse(sessionStorage.getItem("cluster-serving.history")) || []).length >= 30`
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
			ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](filled))
			if err != nil || time.Now().After(deadline) {
				t.Fatalf("wait for a minute of history: %v", err)
			}
			if ok {
				break
			}
		}
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(t.TempDir(), "status-page.png")
	if update {
		path = "../../docs/images/status-page.png"
	}
	writeFile(t, path, png, 0o644)
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}
