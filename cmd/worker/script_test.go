package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

var update = flag.Bool("update", false, "rewrite the golden output in testdata/script/*.txtar")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"worker": func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the command-line scripts under testdata/script: each is a
// config root, a task and the expected output of the real commands.
// `go test ./cmd/worker -update` rewrites the expected output.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: *update,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// httpget URL: GET URL and write the body to stdout; fails
			// unless the status is 200.
			"httpget": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 1 || neg {
					ts.Fatalf("usage: httpget URL")
				}
				res, err := http.Get(args[0])
				ts.Check(err)
				defer res.Body.Close()
				body, err := io.ReadAll(res.Body)
				ts.Check(err)
				if res.StatusCode != http.StatusOK {
					ts.Fatalf("GET %s: %s\n%s", args[0], res.Status, body)
				}
				_, _ = ts.Stdout().Write(body)
			},
			// exits CODE PROG ARGS...: run PROG like exec and require that
			// exact exit status, where `! exec` accepts any failure.
			"exits": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) < 2 {
					ts.Fatalf("usage: exits CODE program [args...]")
				}
				want, err := strconv.Atoi(args[0])
				if err != nil {
					ts.Fatalf("exits: %q is not an exit status", args[0])
				}
				got := 0
				if err := ts.Exec(args[1], args[2:]...); err != nil {
					var ee *exec.ExitError
					if !errors.As(err, &ee) {
						ts.Fatalf("exits: %v", err)
					}
					got = ee.ExitCode()
				}
				if got != want {
					ts.Fatalf("exit status %d, want %d", got, want)
				}
			},
			// waitready URL: wait until URL answers 2xx (a worker's
			// /readyz once its consumer is bound).
			"waitready": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 1 || neg {
					ts.Fatalf("usage: waitready URL")
				}
				client := &http.Client{Timeout: time.Second}
				deadline := time.Now().Add(20 * time.Second)
				for {
					resp, err := client.Get(args[0])
					if err == nil {
						resp.Body.Close()
						if resp.StatusCode/100 == 2 {
							return
						}
						err = fmt.Errorf("%s", resp.Status)
					}
					if time.Now().After(deadline) {
						ts.Fatalf("%s is not ready after 20s: %v", args[0], err)
					}
					time.Sleep(50 * time.Millisecond)
				}
			},
			// waitfor ADDR: wait until a TCP listener accepts on ADDR, so a
			// script can start `worker run &` and then talk to it.
			"waitfor": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 1 || neg {
					ts.Fatalf("usage: waitfor host:port")
				}
				deadline := time.Now().Add(20 * time.Second)
				for {
					c, err := net.DialTimeout("tcp", args[0], time.Second)
					if err == nil {
						c.Close()
						return
					}
					if time.Now().After(deadline) {
						ts.Fatalf("nothing listens on %s after 20s: %v", args[0], err)
					}
					time.Sleep(50 * time.Millisecond)
				}
			},
		},
		Setup: func(env *testscript.Env) error {
			// Free loopback ports for scripts that start an embedded
			// server and serve --http and --ui.
			for _, name := range []string{"NATS_PORT", "HTTP_PORT", "UI_PORT"} {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					return err
				}
				env.Setenv(name, fmt.Sprint(ln.Addr().(*net.TCPAddr).Port))
				defer ln.Close() // held until all are chosen, so they differ
			}
			examples, err := filepath.Abs("../../examples")
			if err != nil {
				return err
			}
			env.Setenv("EXAMPLES", examples)
			schemas, err := filepath.Abs("../../events/schema")
			if err != nil {
				return err
			}
			env.Setenv("SCHEMAS", schemas)
			env.Setenv("ROLECALL_LOG_LEVEL", "warn")
			return nil
		},
	})
}
