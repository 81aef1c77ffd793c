package main

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/ui"
)

// uiFlags turn on the read-only audit view (package ui).
type uiFlags struct {
	UI          string `name:"ui" help:"Serve the read-only audit view (/ui/, /api/decisions) on ADDR, a listener apart from --http. Off unless given." env:"ROLECALL_UI" placeholder:"ADDR"`
	UITokenFile string `name:"ui-token-file" help:"File holding the bearer token the audit view's API requires; required unless --ui is on loopback." env:"ROLECALL_UI_TOKEN_FILE" type:"path"`
}

// check refuses, before anything starts, an audit view on an address
// beyond loopback without a token.
func (f uiFlags) check() error {
	if f.UI != "" && f.UITokenFile == "" && !ui.IsLoopback(f.UI) {
		return usageErr("--ui %s is not a loopback address: give --ui-token-file", f.UI)
	}
	return nil
}

// serveUI starts the audit view; run has called check before anything started.
func (f uiFlags) serveUI(js jetstream.JetStream, cfg pipeline.Config, src pipeline.SnapshotSource, log *slog.Logger) (func(), error) {
	var token []byte
	if f.UITokenFile != "" {
		var err error
		if token, err = ui.ReadToken(f.UITokenFile); err != nil {
			return nil, usageErr("--ui-token-file: %v", err)
		}
	}
	s, err := ui.Listen(f.UI, ui.Options{JetStream: js, Config: cfg, Snapshots: src, Token: token, Logger: log})
	if errors.Is(err, ui.ErrTokenRequired) {
		return nil, usageErr("--ui: %v", err)
	}
	if err != nil {
		return nil, fmt.Errorf("--ui %s: %w", f.UI, err)
	}
	log.Info("audit view listening", "addr", s.Addr().String(), "url", "http://"+s.Addr().String()+"/ui/", "token", token != nil)
	return func() { _ = shutdownWithin(2*time.Second, s.Close) }, nil
}
