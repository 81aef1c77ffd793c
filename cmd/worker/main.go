// Command worker is rolecall's one binary: the worker (run) and the tools
// around it (resolve, roster, validate, submit, tail, bench).
//
// Exit codes: 0 success, 1 typed failure (the failure JSON is on stdout),
// 2 usage error (message on stderr).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// exitError carries an exit code through kong's Run.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

// errTypedFailure is returned after a failure JSON was printed: exit 1, no
// further message.
var errTypedFailure = &exitError{code: 1}

func usageErr(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// globals are shared by every subcommand.
type globals struct {
	Root     string `help:"Config root directory." default:"." env:"ROLECALL_ROOT" type:"path"`
	LogLevel string `help:"Log level: debug, info, warn, error." default:"info" env:"ROLECALL_LOG_LEVEL"`

	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

type cli struct {
	globals

	Run         runCmd         `cmd:"" help:"Run the worker (embedded NATS when no URL is configured)."`
	Resolve     resolveCmd     `cmd:"" help:"Resolve a task offline and print the resolved-spec (or failure) JSON."`
	Roster      rosterCmd      `cmd:"" help:"List the identities a planner may assign."`
	Validate    validateCmd    `cmd:"" help:"Check the config root; print file:line: code: message per problem."`
	Submit      submitCmd      `cmd:"" help:"Publish a task event."`
	Tail        tailCmd        `cmd:"" help:"Print outcome events as they arrive."`
	Bench       benchCmd       `cmd:"" help:"Measure the pipeline against a bare JetStream loop."`
	Version     versionCmd     `cmd:"" help:"Print the version."`
	Healthcheck healthcheckCmd `cmd:"" help:"Probe a worker's /readyz (for container health checks); exit 0 when healthy."`
}

type versionCmd struct{}

func (versionCmd) Run(g *globals) error {
	fmt.Fprintln(g.stdout, version)
	return nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is main without os.Exit, so tests can drive the CLI in-process.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var c cli
	c.stdin, c.stdout, c.stderr = stdin, stdout, stderr
	parser, err := kong.New(&c,
		kong.Name("worker"),
		kong.Description("rolecall: resolve agent configurations from task events, with provenance."),
		kong.UsageOnError(),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { panic(exitPanic(code)) }),
	)
	if err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return 2
	}
	code := func() (code int) {
		defer func() {
			if r := recover(); r != nil {
				if p, ok := r.(exitPanic); ok {
					code = int(p)
					return
				}
				panic(r)
			}
		}()
		kctx, err := parser.Parse(args)
		if err != nil {
			fmt.Fprintln(stderr, "worker:", err)
			return 2
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		kctx.BindTo(ctx, (*context.Context)(nil))
		err = kctx.Run(&c.globals)
		var ee *exitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee):
			if ee.err != nil {
				fmt.Fprintln(stderr, "worker:", ee.err)
			}
			return ee.code
		default:
			fmt.Fprintln(stderr, "worker:", err)
			return 1
		}
	}()
	return code
}

// exitPanic lets kong's --help exit unwind through run instead of calling
// os.Exit, so in-process tests keep running.
type exitPanic int
