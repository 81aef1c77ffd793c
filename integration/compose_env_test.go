package integration

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestComposePassesOTELFromTheShell: `docker compose config` of
// docker-compose.yml gives every worker the OTEL_* variables set in the
// shell, keeps the setup's defaults for the three it sets, and passes no
// value for those the shell leaves unset (so the SDK's own defaults hold).
func TestComposePassesOTELFromTheShell(t *testing.T) {
	compose := composeCommand(t)
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"OTEL_SERVICE_NAME=probe-worker",
		"OTEL_RESOURCE_ATTRIBUTES=deployment.environment.name=test",
		"OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20x",
		"OTEL_TRACES_SAMPLER=parentbased_traceidratio",
	)
	cmd := exec.Command(compose[0], append(compose[1:], "-f", root+"/../docker-compose.yml", "config")...)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("compose config: %v", err)
	}
	var cfg struct {
		Services map[string]struct {
			Environment map[string]*string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"worker-1", "worker-2", "worker-3"} {
		got := cfg.Services[name].Environment
		for k, want := range map[string]string{
			"OTEL_SERVICE_NAME":           "probe-worker",
			"OTEL_RESOURCE_ATTRIBUTES":    "deployment.environment.name=test",
			"OTEL_EXPORTER_OTLP_HEADERS":  "authorization=Bearer%20x",
			"OTEL_TRACES_SAMPLER":         "parentbased_traceidratio",
			"OTEL_TRACES_EXPORTER":        "none",
			"OTEL_METRICS_EXPORTER":       "prometheus",
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector:4318",
		} {
			if v := got[k]; v == nil || *v != want {
				t.Errorf("%s: %s = %v, want %q", name, k, v, want)
			}
		}
		for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_TRACES_SAMPLER_ARG"} {
			if v, ok := got[k]; ok && v != nil && *v != "" {
				t.Errorf("%s: %s = %q though the shell does not set it", name, k, *v)
			}
		}
	}
}
