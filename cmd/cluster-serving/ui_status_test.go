package main

// The status document behind the page, as the door answers it and as
// `status -json -once` prints it, and the traffic that fills it.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
)

// statusDoc is the part of the status document (GET /ui/status, status
// -json) the test checks.
type statusDoc struct {
	At   string
	Jobs []struct {
		Job                            string
		Rate                           float64
		Pending, AckPending, Processed int64
		Delivered                      int64
	}
	Workers []struct {
		ID, Job, PID string
		Processed    int64
	}
	Doors []struct {
		Door, Listen, Process, Host, PID string
		Requests                         int64
	}
	Models []struct{ Name, Version, State string }
	Errors []struct {
		Status  int
		Message string
	}
}

// uiClient calls the door of the status page's test (uiMesh sets its TLS).
var uiClient = &http.Client{Timeout: 30 * time.Second}

// askDoor sends method url with the bearer token (none when empty) and
// body as JSON, and returns the status, the Content-Type and the body.
func askDoor(method, url, token, body string) (int, string, []byte, error) {
	auth := ""
	if token != "" {
		auth = "Bearer " + token
	}
	resp, b, err := doortest.Ask(uiClient, method, url, body, "Authorization", auth, "Content-Type", "application/json")
	if resp == nil {
		return 0, "", nil, err
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b, err
}

// post sends body to the door's /predict with the token and returns the
// status and the error message of a JSON error answer.
func post(base, token, body string) (int, string, error) {
	st, _, b, err := askDoor(http.MethodPost, base+"/predict", token, body)
	var e struct{ Error string }
	_ = json.Unmarshal(b, &e)
	return st, e.Error, err
}

// trickle sends add requests through the HTTP door until the test ends,
// at an uneven pace, and counts the answers.
func trickle(t *testing.T, base, token string) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ok int64
	var firstErr error
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			st, msg, err := post(base, token, `{"instances":[{"x":[1,2,3,4]}]}`)
			mu.Lock()
			if st == http.StatusOK {
				ok++
			} else if firstErr == nil && ctx.Err() == nil {
				firstErr = fmt.Errorf("request %d: %d %s %v", i, st, msg, err)
			}
			mu.Unlock()
			// An uneven pace, so that the rate moves from one poll to the next.
			time.Sleep(time.Duration(10+i%4*10) * time.Millisecond)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if firstErr != nil || ok == 0 {
			t.Errorf("trickle: %d answered, first error %v", ok, firstErr)
		}
	})
}

// getStatus answers GET /ui/status with the token (none when empty).
func getStatus(t *testing.T, base, token string) (int, []byte) {
	t.Helper()
	st, ct, b, err := askDoor(http.MethodGet, base+"/ui/status", token, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ct, "application/json") {
		t.Errorf("GET /ui/status: got Content-Type %q, want application/json", ct)
	}
	return st, b
}

// compareWithCLI checks the page's document against `status -json -once`
// taken after it: the same jobs, workers, doors and models, and counters
// no lower.
func compareWithCLI(t *testing.T, base, token, natsURL string) {
	t.Helper()
	st, body := getStatus(t, base, token)
	var page, cli statusDoc
	if err := json.Unmarshal(body, &page); st != http.StatusOK || err != nil {
		t.Fatalf("GET /ui/status: got %d %s (%v)", st, body, err)
	}
	t.Logf("the status document: %d bytes for %d jobs, %d workers, %d doors, %d models, %d errors",
		len(body), len(page.Jobs), len(page.Workers), len(page.Doors), len(page.Models), len(page.Errors))
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "status", "-json", "-once", "-nats", natsURL).Output()
	if err != nil {
		t.Fatalf("status -json -once: %v\n%s", err, out)
	}
	if err := json.Unmarshal(out, &cli); err != nil || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
		t.Fatalf("status -json -once: got %q (%v), want one line of JSON", out, err)
	}
	type counts map[string]int64
	index := func(d statusDoc) (jobs, workers, doors, models counts) {
		jobs, workers, doors, models = counts{}, counts{}, counts{}, counts{}
		for _, j := range d.Jobs {
			jobs[j.Job] = j.Processed + j.Delivered
		}
		for _, w := range d.Workers {
			workers[w.ID] = w.Processed
		}
		for _, x := range d.Doors {
			doors[x.Door+" "+x.Listen+" "+x.Host+" "+x.PID] = x.Requests
		}
		for _, m := range d.Models {
			models[m.Name+" v"+m.Version+" "+m.State] = 0
		}
		return
	}
	pj, pw, pd, pm := index(page)
	cj, cw, cd, cm := index(cli)
	for _, c := range []struct {
		what      string
		page, cli counts
	}{{"jobs", pj, cj}, {"workers", pw, cw}, {"doors", pd, cd}, {"models", pm, cm}} {
		if len(c.page) == 0 || len(c.page) != len(c.cli) {
			t.Errorf("%s: page has %v, status -json %v; want the same, not none", c.what, c.page, c.cli)
		}
		for k, n := range c.page {
			if m, ok := c.cli[k]; !ok || m < n {
				t.Errorf("%s %q: page %d, status -json %d (present %v); want present and no lower", c.what, k, n, m, ok)
			}
		}
	}
}
