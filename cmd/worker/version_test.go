package main

import "testing"

func TestBuildInfoString(t *testing.T) {
	tests := []struct {
		b    buildInfo
		want string
	}{
		{buildInfo{Version: "v1.4.0", Module: "github.com/rolecall/rolecall", Revision: "0123456789abcdef", Time: "2026-05-04T10:00:00Z", Go: "go1.26.8"},
			"worker v1.4.0 (github.com/rolecall/rolecall, revision 0123456789abcdef 2026-05-04T10:00:00Z, go1.26.8)"},
		{buildInfo{Version: "v0.0.0-20260504100000-0123456789ab+dirty", Module: "github.com/rolecall/rolecall", Revision: "0123456789abcdef", Modified: true, Go: "go1.26.8"},
			"worker v0.0.0-20260504100000-0123456789ab+dirty (github.com/rolecall/rolecall, revision 0123456789abcdef modified, go1.26.8)"},
		{buildInfo{Version: "dev", Module: "github.com/rolecall/rolecall"},
			"worker dev (github.com/rolecall/rolecall, revision unknown)"},
	}
	for _, tt := range tests {
		if got := tt.b.String(); got != tt.want {
			t.Errorf("got  %s\nwant %s", got, tt.want)
		}
	}
}
