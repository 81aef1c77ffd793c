package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/rolecall/rolecall/integration/images"
)

func main() {
	worker := flag.String("worker", envOr("ROLECALL_WORKER_IMAGE", images.DefaultWorkerTag), "worker image tag")
	natsTag := flag.String("nats", envOr("ROLECALL_NATS_IMAGE", images.DefaultNATSTag), "nats-server image tag")
	version := flag.String("version", "", "version stamped into the worker (default: dev)")
	quiet := flag.Bool("q", false, "print only errors")
	rootFlag := flag.String("root", ".", "repository to build from (any directory inside it)")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: buildimages [-worker TAG] [-nats TAG] [-version V] [-root DIR] [-q]")
		os.Exit(2)
	}
	root, err := images.RepoRoot(*rootFlag)
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildimages:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	opt := images.Options{Root: root, Version: *version, Log: os.Stderr}
	if *quiet {
		opt.Log = nil
	}
	if err := images.Build(ctx, opt, images.Worker(*worker), images.NATS(*natsTag)); err != nil {
		fmt.Fprintln(os.Stderr, "buildimages:", err)
		os.Exit(1)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
