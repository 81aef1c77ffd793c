package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
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
			// A free loopback port for scripts that start an embedded server.
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			port := ln.Addr().(*net.TCPAddr).Port
			ln.Close()
			env.Setenv("NATS_PORT", fmt.Sprint(port))
			examples, err := filepath.Abs("../../examples")
			if err != nil {
				return err
			}
			env.Setenv("EXAMPLES", examples)
			env.Setenv("ROLECALL_LOG_LEVEL", "warn")
			return nil
		},
	})
}
