package main

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestBannerCommandsRun starts a job for models of every kind of input
// (dynamic dimensions, two inputs, integers, bools, a large fixed image)
// and runs each command its banner prints exactly as printed: the predict
// lines through this binary's own predict command, in process, and the
// curl line as an HTTP request. Each must get an answer, not an error.
func TestBannerCommandsRun(t *testing.T) {
	skipIfShort(t)
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		model    string
		wantLine string // a part of the -fill line
		inline   bool   // whether -d, nats req and curl lines are printed
	}{
		{"add_f32.onnx", "-fill 0.5 -shape 4   #", true},
		{"matmul_dyn.onnx", "-fill 0.5 -shape 1,4   # one request, every value 0.5; dynamic dimensions set to 1", true},
		{"two_io.onnx", "-fill 0.5   #", true},
		{"add_i32.onnx", "-fill 1 -shape 4   #", true},
		{"not_bool.onnx", "-fill 1 -shape 4   #", true},
		{"cast_str_f32.onnx", "-fill 1 -shape 3   #", true}, // strings: "1"
		{"image_mean.onnx", "-fill 0.5 -shape 3,224,224   #", false},
	} {
		t.Run(tc.model, func(t *testing.T) {
			cfg, url, _, env := testJobModel(t, tc.model, "")
			start := spawn(t, env, "start", "-c", cfg)
			waitReady(t, url, start)
			waitLog(t, start, "Stop with Ctrl-C")
			var predicts, curls int
			for _, line := range strings.Split(start.logs(), "\n") {
				words, err := shellSplit(line)
				if err != nil {
					t.Fatalf("banner line %q: %v", line, err)
				}
				switch {
				case len(words) > 1 && words[0] == bin && words[1] == "predict":
					predicts++
					if strings.Contains(line, "-fill") && !strings.Contains(line, bin+" predict -c "+cfg+" "+tc.wantLine) {
						t.Errorf("got %q, want it to contain %q", line, tc.wantLine)
					}
					var out, errOut bytes.Buffer
					if err := run(words[1:], &out, &errOut); err != nil || !strings.HasPrefix(out.String(), `{"predictions":["`) {
						t.Errorf("%s: got %v, %q; want an answer", line, err, out.String())
					}
				case len(words) > 0 && words[0] == "curl":
					curls++
					if code, body := runCurl(t, words); code != http.StatusOK {
						t.Errorf("%s: got %d %s, want 200", line, code, body)
					}
				}
			}
			if want := map[bool]int{true: 2, false: 1}[tc.inline]; predicts != want || curls != want-1 {
				t.Errorf("ran %d predict and %d curl lines, want %d and %d:\n%s", predicts, curls, want, want-1, start.logs())
			}
			start.signalAndWait(t, syscall.SIGTERM)
		})
	}
}

// runCurl sends the request of `curl -s URL -H 'K: V' -d BODY` and
// returns the status and body of the answer.
func runCurl(t *testing.T, words []string) (int, string) {
	t.Helper()
	var url, body string
	header := http.Header{}
	for i := 1; i < len(words); i++ {
		switch w := words[i]; {
		case w == "-s":
		case w == "-H" && i+1 < len(words):
			k, v, _ := strings.Cut(words[i+1], ":")
			header.Set(k, strings.TrimSpace(v))
			i++
		case w == "-d" && i+1 < len(words):
			body = words[i+1]
			i++
		case strings.HasPrefix(w, "http://"):
			url = w
		default:
			t.Fatalf("curl word %q: not one the banner prints", w)
		}
	}
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	return httpDo(t, req)
}

// httpDo sends req with the default client and returns the answer's
// status and body.
func httpDo(t testing.TB, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// shellSplit splits line into words as a POSIX shell would for the
// quoting the banner uses: blanks separate words, '...' quotes anything
// but ', a backslash escapes the next character, and # at the start of a
// word begins a comment.
func shellSplit(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		case c == '#' && !inWord:
			return words, nil
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, io.ErrUnexpectedEOF
			}
			cur.WriteString(line[i+1 : i+1+end])
			i, inWord = i+1+end, true
		case c == '\\' && i+1 < len(line):
			cur.WriteByte(line[i+1])
			i, inWord = i+1, true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

func TestShellJoinSplitRoundTrip(t *testing.T) {
	words := []string{"/a b/cluster-serving", "-d", `{"instances":[{"it's":[1]}]}`, "plain", "-c", "/x/config.yaml"}
	got, err := shellSplit(shellJoin(words...))
	if err != nil || !slices.Equal(got, words) {
		t.Errorf("shellSplit(shellJoin(%q)) = %q, %v", words, got, err)
	}
}
