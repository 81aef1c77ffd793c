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

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/telemetry"
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

// discoverOptions are the options every command loads the config root with.
func (g *globals) discoverOptions() discover.Options {
	return discover.Options{AllowHardLinks: g.AllowHardLinks}
}

func usageErr(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// globals are shared by every subcommand.
type globals struct {
	Root     string `help:"Config root directory." default:"." env:"ROLECALL_ROOT" type:"path"`
	LogLevel string `help:"Log level: debug, info, warn, error." default:"info" env:"ROLECALL_LOG_LEVEL"`
	// Hard links are refused by default (docs/CONFIG.md, path confinement).
	AllowHardLinks bool `name:"allow-hard-links" help:"Read config files that have more than one hard link (refused by default: a hard link can lead out of the config root unseen)." env:"ROLECALL_ALLOW_HARD_LINKS"`

	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

type cli struct {
	globals
	ShowVersion versionFlag `name:"version" help:"Print the version and exit."`

	Run         runCmd         `cmd:"" help:"Run the worker (embedded NATS when no URL is configured)."`
	Resolve     resolveCmd     `cmd:"" help:"Resolve a task offline and print the resolved-spec (or failure) JSON."`
	Explain     explainCmd     `cmd:"" help:"Explain a task's decision, or a recorded outcome's: every field's candidates, reasons and origins."`
	Roster      rosterCmd      `cmd:"" help:"List the identities a planner may assign."`
	Validate    validateCmd    `cmd:"" help:"Check the config root; print file:line: code: message per problem."`
	Config      configCmd      `cmd:"" help:"Push, list and roll back the config bundles of a fleet in NATS."`
	Submit      submitCmd      `cmd:"" help:"Publish a task event."`
	Tail        tailCmd        `cmd:"" help:"Print outcome events as they arrive."`
	Bench       benchCmd       `cmd:"" help:"Measure the pipeline against a bare JetStream loop."`
	Schema      schemaCmd      `cmd:"" help:"Print an embedded JSON Schema of the events (they resolve offline), or list them with their $id."`
	Version     versionCmd     `cmd:"" help:"Print the version, module, VCS revision and Go version."`
	Healthcheck healthcheckCmd `cmd:"" help:"Probe a worker's /readyz (for container health checks); exit 0 when healthy."`
	Replay      replayCmd      `cmd:"" help:"Re-decide recorded outcomes against a config root: exit 0 same, 1 non-deterministic, 3 would change, 4 cannot replay."`
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is main without os.Exit, so tests can drive the CLI in-process.
// SIGINT and SIGTERM cancel its context; a second one ends the process at
// once (the signal's default action), without waiting for the drain.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	return runContext(ctx, args, stdin, stdout, stderr)
}

// runContext is run with the context the command runs under, so a test
// can stop a worker without a signal.
func runContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
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
	return func() (code int) {
		defer func() {
			if r := recover(); r != nil {
				if p, ok := r.(exitPanic); ok {
					code = int(p)
					return
				}
				panic(r)
			}
		}()
		if len(args) == 0 {
			// Nothing asked: the usage, as for a usage error.
			parser.Stdout = stderr
			if kctx, err := kong.Trace(parser, nil); err == nil {
				_ = kctx.PrintUsage(false)
			}
			return 2
		}
		kctx, err := parser.Parse(args)
		if err != nil {
			fmt.Fprintln(stderr, "worker:", err)
			return 2
		}
		// --log-level is every command's flag: a bad one is a usage
		// error whether or not the command logs.
		if _, err := telemetry.ParseLevel(c.LogLevel); err != nil {
			fmt.Fprintln(stderr, "worker: --log-level:", err)
			return 2
		}
		kctx.BindTo(ctx, (*context.Context)(nil))
		err = kctx.Run(&c.globals)
		var ee *exitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee):
			if ee.err != nil {
				fmt.Fprintln(stderr, "worker:", noJetStream(ee.err))
			}
			return ee.code
		default:
			fmt.Fprintln(stderr, "worker:", noJetStream(err))
			return 1
		}
	}()
}

// exitPanic lets kong's --help exit unwind through run instead of calling
// os.Exit, so in-process tests keep running.
type exitPanic int
