package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"testing"

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
		Setup: func(env *testscript.Env) error {
			// A free loopback port for scripts that start an embedded server.
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			port := ln.Addr().(*net.TCPAddr).Port
			ln.Close()
			env.Setenv("NATS_PORT", fmt.Sprint(port))
			env.Setenv("ROLECALL_LOG_LEVEL", "warn")
			return nil
		},
	})
}
