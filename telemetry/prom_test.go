package telemetry_test

import (
	"regexp"
	"strings"
)

// sample is one expected line of the Prometheus text format: a metric name,
// labels it must have (others may be present) and its value.
type sample struct {
	name   string
	labels map[string]string
	value  string
}

var labelRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// in reports whether body holds a line matching s.
func (s sample) in(body string) bool {
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 || line[sp+1:] != s.value {
			continue
		}
		series := line[:sp]
		name, labels, _ := strings.Cut(series, "{")
		if name != s.name {
			continue
		}
		got := map[string]string{}
		for _, m := range labelRE.FindAllStringSubmatch(labels, -1) {
			got[m[1]] = m[2]
		}
		ok := true
		for k, v := range s.labels {
			ok = ok && got[k] == v
		}
		if ok {
			return true
		}
	}
	return false
}
