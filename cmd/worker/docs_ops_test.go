package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// docSection returns the part of a page from the heading to the next
// heading of the same level.
func docSection(t *testing.T, page, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("docs/%s has no %q", page, heading)
	}
	level := heading[:strings.IndexByte(heading, ' ')+1]
	doc = doc[start+1:]
	if end := strings.Index(doc[len(heading):], "\n"+level); end >= 0 {
		doc = doc[:len(heading)+end+1]
	}
	return doc
}

// TestFirstHourCommandsAreRun: every command of docs/OPERATIONS.md "The
// first hour" is run by testdata/script/firsthour.txtar. A script line is
// the page's command once the test's own flags (--listen, --store, --nats,
// which give it free ports and its own store) are dropped and $HTTP_PORT is
// read as 8080; env lines right before it are its VAR=value prefix.
func TestFirstHourCommandsAreRun(t *testing.T) {
	section := docSection(t, "OPERATIONS.md", "## The first hour")
	var want []string
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		for _, line := range strings.Split(strings.TrimSpace(block[1]), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				want = append(want, line)
			}
		}
	}
	if len(want) < 5 {
		t.Fatalf("found %d commands in the first-hour section, want the five steps' commands: %q", len(want), want)
	}

	script, err := os.ReadFile(filepath.Join("testdata", "script", "firsthour.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	var ran []string
	var env []string
	for _, line := range strings.Split(string(script), "\n") {
		if strings.HasPrefix(line, "-- ") {
			break
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "env":
			if k, v, _ := strings.Cut(f[1], "="); v != "" && k != "ROLECALL_LOG_LEVEL" {
				env = append(env, f[1])
			}
			continue
		case len(f) > 2 && f[0] == "exits" && f[2] == "worker":
			f = f[2:]
		case len(f) > 1 && f[0] == "exec" && f[1] == "worker":
			f = f[1:]
		default:
			env = nil
			continue
		}
		cmd := slices.Clone(env)
		for i := 0; i < len(f); i++ {
			switch a := f[i]; {
			case a == "--listen" || a == "--store" || a == "--nats":
				i++
			case strings.HasPrefix(a, "&") && strings.HasSuffix(a, "&"):
			default:
				cmd = append(cmd, strings.ReplaceAll(a, "$HTTP_PORT", "8080"))
			}
		}
		ran = append(ran, strings.Join(cmd, " "))
		env = nil
	}
	for _, w := range want {
		if !slices.Contains(ran, w) {
			t.Errorf("the page's command\n\t%s\nis not run by firsthour.txtar, which runs\n\t%s", w, strings.Join(ran, "\n\t"))
		}
	}
}

// TestComposePassesTheOTELVariables: docker-compose.yml passes to every
// worker exactly the OTEL_* variables docs/OPERATIONS.md lists for it.
func TestComposePassesTheOTELVariables(t *testing.T) {
	section := docSection(t, "OPERATIONS.md", "### In docker compose")
	var documented []string
	for _, m := range regexp.MustCompile("`(OTEL_[A-Z_]+)`").FindAllStringSubmatch(section, -1) {
		if !slices.Contains(documented, m[1]) {
			documented = append(documented, m[1])
		}
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Worker struct {
			Environment map[string]*string `yaml:"environment"`
		} `yaml:"x-worker"`
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatal(err)
	}
	var passed []string
	for k := range compose.Worker.Environment {
		if strings.HasPrefix(k, "OTEL_") {
			passed = append(passed, k)
		}
	}
	slices.Sort(documented)
	slices.Sort(passed)
	if !slices.Equal(documented, passed) {
		t.Errorf("docker-compose.yml passes\n\t%v\nthe docs list\n\t%v", passed, documented)
	}
	if len(passed) < 30 {
		t.Errorf("only %d OTEL_* variables reach the workers", len(passed))
	}
}
