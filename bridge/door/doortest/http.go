package doortest

import (
	"io"
	"net/http"
	"strings"
)

// Ask sends method url with body ("" for none) and the headers given as
// name, value pairs (a pair with an empty value is left out) by client,
// and returns the answer and its body, read and closed; err is the
// transport's or the read's.
func Ask(client *http.Client, method, url, body string, headers ...string) (*http.Response, []byte, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return nil, nil, err
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] != "" {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}
