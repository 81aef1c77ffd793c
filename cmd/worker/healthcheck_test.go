package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ready":true}`))
	}))
	defer ready.Close()
	notReady := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"ready":false}`))
	}))
	defer notReady.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // nothing listens there any more

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"ready answers 2xx", []string{"--url", ready.URL + "/readyz"}, 0, "ok\n", ""},
		{"not ready answers 503", []string{"--url", notReady.URL + "/readyz"}, 1, "", "503 Service Unavailable"},
		{"nothing listens", []string{"--url", gone.URL + "/readyz"}, 1, "", "healthcheck:"},
		{"not a URL", []string{"--url", "://"}, 2, "", "--url"},
		{"not a URL, its password hidden", []string{"--url", "http://u:s3cret@[::1/readyz"}, 2, "", "worker: --url: malformed URL: missing ']' in host\n"},
		{"timeout 0", []string{"--url", ready.URL + "/readyz", "--timeout=0s"}, 2, "", "--timeout 0s: must be positive"},
		{"timeout negative", []string{"--url", ready.URL + "/readyz", "--timeout=-1s"}, 2, "", "--timeout -1s: must be positive"},
		{"--print shows the body", []string{"--url", ready.URL + "/readyz", "--print"}, 0, `{"ready":true}`, ""},
		{"--print shows an unready body too", []string{"--url", notReady.URL + "/readyz", "--print"}, 1, `{"ready":false}`, "503 Service Unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"healthcheck"}, tt.args...), strings.NewReader(""), &stdout, &stderr)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tt.wantCode, stderr.String())
			}
			if stdout.String() != tt.wantStdout {
				t.Errorf("stdout %q, want %q", stdout.String(), tt.wantStdout)
			}
			if strings.Contains(stderr.String(), "s3cret") {
				t.Errorf("stderr shows the password: %q", stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}
