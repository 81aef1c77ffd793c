package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// healthcheckCmd probes a worker's HTTP endpoint. It exists for container
// health checks: the worker image is FROM scratch, with no shell or curl,
// so the binary checks itself (HEALTHCHECK CMD ["/worker", "healthcheck"]).
type healthcheckCmd struct {
	URL     string        `help:"URL to probe; any 2xx answer is healthy." default:"http://127.0.0.1:8080/readyz" env:"ROLECALL_HEALTHCHECK_URL"`
	Timeout time.Duration `help:"How long the probe may take." default:"3s"`
	Print   bool          `help:"Print the answer's body (the /readyz JSON: connection, snapshot, problems) instead of ok, healthy or not."`
}

func (c *healthcheckCmd) Run(ctx context.Context, g *globals) error {
	if c.Timeout <= 0 {
		return usageErr("--timeout %s: must be positive", c.Timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL, nil)
	if err != nil {
		// Its fault alone: the URL may hold a password.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return usageErr("--url: malformed URL: %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	if c.Print {
		// Bounded: a probe is not a download.
		if _, err := io.Copy(g.stdout, io.LimitReader(resp.Body, 1<<20)); err != nil {
			return fmt.Errorf("healthcheck: %w", err)
		}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("healthcheck: %s answered %s", c.URL, resp.Status)
	}
	if !c.Print {
		fmt.Fprintln(g.stdout, "ok")
	}
	return nil
}
