package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/bundle"
	"github.com/rolecall/rolecall/internal/natstest"
)

// configCLI runs one worker command in this process.
func configCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runContext(context.Background(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

// otherRoot is a config root of one file, apart from examples (a root of
// none is no bundle).
func otherRoot(t *testing.T) string {
	root := t.TempDir()
	writeRootFile(t, root, "rolecall.yaml", "default_pack: default\n")
	return root
}

func TestConfigPushLogRollback(t *testing.T) {
	url := natstest.Start(t).ClientURL()
	examples := filepath.Join("..", "..", "examples")

	// Nothing pushed yet: log and rollback say so.
	if _, errOut, code := configCLI(t, "config", "log", "--nats", url); code != 1 || !strings.Contains(errOut, string(bundle.CodeNotFound)) {
		t.Fatalf("log before any push: exit %d, %s", code, errOut)
	}

	// A root with problems is refused before anything is stored, and its
	// problems are printed as validate prints them.
	out, errOut, code := configCLI(t, "config", "push", "--root", brokenRoot(t), "--nats", url)
	if code != 1 || !strings.Contains(out, "packs/team.yaml") || !strings.Contains(errOut, string(bundle.CodeInvalid)) {
		t.Fatalf("push of a broken root: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}

	out, errOut, code = configCLI(t, "config", "push", "--root", examples, "--nats", url, "--actor", "ana", "-m", "first", "--expect-revision", "0")
	if code != 0 || !strings.HasPrefix(out, "pushed revision ") {
		t.Fatalf("push: exit %d, %s %s", code, out, errOut)
	}
	if out, _, code = configCLI(t, "config", "push", "--root", examples, "--nats", url); code != 0 || !strings.HasPrefix(out, "unchanged") {
		t.Fatalf("second push of the same root: exit %d, %s", code, out)
	}
	other := otherRoot(t)
	if _, errOut, code = configCLI(t, "config", "push", "--root", other, "--nats", url, "--expect-revision", "0"); code != 1 || !strings.Contains(errOut, string(bundle.CodeRevisionConflict)) {
		t.Fatalf("stale push: exit %d, %s", code, errOut)
	}
	if _, errOut, code = configCLI(t, "config", "push", "--root", other, "--nats", url, "-m", "empty"); code != 0 {
		t.Fatalf("push of another root: exit %d, %s", code, errOut)
	}

	out, _, code = configCLI(t, "config", "log", "--nats", url, "--json")
	var recs []bundle.Record
	if err := json.Unmarshal([]byte(out), &recs); code != 0 || err != nil || len(recs) != 2 || recs[0].Message != "empty" || recs[1].Actor != "ana" {
		t.Fatalf("log --json: exit %d, %v, %s", code, err, out)
	}
	if out, _, _ = configCLI(t, "config", "log", "--nats", url); !strings.Contains(out, "REVISION") || !strings.Contains(out, " *") {
		t.Fatalf("log: %s", out)
	}

	out, errOut, code = configCLI(t, "config", "rollback", "--nats", url, "--json")
	var rb bundle.Record
	if err := json.Unmarshal([]byte(out), &rb); code != 0 || err != nil || rb.Digest != recs[1].Digest || rb.RollbackOf != recs[1].Revision {
		t.Fatalf("rollback: exit %d, %v, %s %s", code, err, out, errOut)
	}
}

// A worker with --config-from nats is not ready before a bundle exists,
// says why, and serves the first bundle pushed, citing its revision.
func TestRunConfigFromNATS(t *testing.T) {
	url := natstest.Start(t).ClientURL()
	addr := freeAddr(t)
	w := startWorker(t, "--root", t.TempDir(), "--nats", url, "--config-from", "nats", "--http", addr)
	body := waitHTTP(t, w, "http://"+addr+"/readyz", func(status int, body []byte) bool {
		return status == http.StatusServiceUnavailable && bytes.Contains(body, []byte("no config bundle"))
	})
	t.Logf("before a push: %s", body)
	// The worker made the buckets; the history is empty, not an error.
	if out, errOut, code := configCLI(t, "config", "log", "--nats", url, "--json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("log of empty buckets: exit %d, %q %s", code, out, errOut)
	}
	out, errOut, code := configCLI(t, "config", "push", "--root", filepath.Join("..", "..", "examples"), "--nats", url, "--json")
	var rec bundle.Record
	if err := json.Unmarshal([]byte(out), &rec); code != 0 || err != nil {
		t.Fatalf("push: exit %d, %v, %s", code, err, errOut)
	}
	waitHTTP(t, w, "http://"+addr+"/readyz", func(status int, body []byte) bool {
		var r struct {
			Ready          bool   `json:"ready"`
			ConfigRevision uint64 `json:"config_revision"`
			ConfigSource   string `json:"config_source"`
		}
		return status == http.StatusOK && json.Unmarshal(body, &r) == nil && r.Ready && r.ConfigRevision == rec.Revision && r.ConfigSource == "nats"
	})
	waitHTTP(t, w, "http://"+addr+"/metrics", func(status int, body []byte) bool {
		return status == http.StatusOK && bytes.Contains(body, []byte("rolecall_config_revision"))
	})
}

// A worker that may not create the config buckets (--no-create) and
// starts before the first push does not exit: it stays up, not ready and
// saying why, and serves the first bundle once an operator pushes it.
func TestRunConfigFromNATSWithoutCreateWaitsForThePush(t *testing.T) {
	url := natstest.Start(t).ClientURL()
	// A worker on files makes the streams a --no-create worker needs (it
	// makes no config bucket).
	filesAddr := freeAddr(t)
	files := startWorker(t, "--root", t.TempDir(), "--nats", url, "--http", filesAddr)
	waitHTTP(t, files, "http://"+filesAddr+"/readyz", func(status int, _ []byte) bool { return status == http.StatusOK })

	addr := freeAddr(t)
	w := startWorker(t, "--root", t.TempDir(), "--nats", url, "--config-from", "nats", "--no-create", "--http", addr)
	body := waitHTTP(t, w, "http://"+addr+"/readyz", func(status int, body []byte) bool {
		return status == http.StatusServiceUnavailable && bytes.Contains(body, []byte(bundle.CodeNotFound))
	})
	t.Logf("before a push: %s", body)
	out, errOut, code := configCLI(t, "config", "push", "--root", filepath.Join("..", "..", "examples"), "--nats", url, "--json")
	var rec bundle.Record
	if err := json.Unmarshal([]byte(out), &rec); code != 0 || err != nil {
		t.Fatalf("push: exit %d, %v, %s", code, err, errOut)
	}
	waitHTTP(t, w, "http://"+addr+"/readyz", func(status int, body []byte) bool {
		var r struct {
			Ready          bool   `json:"ready"`
			ConfigRevision uint64 `json:"config_revision"`
		}
		return status == http.StatusOK && json.Unmarshal(body, &r) == nil && r.Ready && r.ConfigRevision == rec.Revision
	})
}

// Before any bundle the audit view gets an empty configuration, never nil.
func TestUISnapshotsBeforeABundle(t *testing.T) {
	nc := natstest.Connect(t, natstest.Start(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := bundle.Follow(ctx, js, bundle.StoreOptions{Create: true}, bundle.WatchOptions{})
	if src.Snapshot() != nil {
		t.Fatal("a snapshot before any push")
	}
	snap := uiSnapshots(src).Snapshot()
	if snap == nil || snap.Revision != 0 || snap.ConfigSource != "nats" {
		t.Fatalf("ui snapshot %+v", snap)
	}
}

// TestConfigJSONFailures: with --json a refused push prints one JSON
// object on stdout, {code, message, problems}, each problem as validate
// --json prints it; the problems used to be text lines, so stdout was no
// JSON.
func TestConfigJSONFailures(t *testing.T) {
	url := natstest.Start(t).ClientURL()
	var got struct {
		Code     string `json:"code"`
		Message  string `json:"message"`
		Problems []struct {
			File string `json:"file"`
			Code string `json:"code"`
		} `json:"problems"`
	}
	out, errOut, code := configCLI(t, "config", "push", "--root", brokenRoot(t), "--nats", url, "--json")
	if err := json.Unmarshal([]byte(out), &got); code != 1 || err != nil {
		t.Fatalf("push of a broken root: exit %d, %v\nstdout %s\nstderr %s", code, err, out, errOut)
	}
	if got.Code != string(bundle.CodeInvalid) || len(got.Problems) == 0 || got.Problems[0].File != "packs/team.yaml" || got.Message == "" {
		t.Errorf("push of a broken root: %+v", got)
	}

	examples := filepath.Join("..", "..", "examples")
	out, errOut, code = configCLI(t, "config", "push", "--root", examples, "--nats", url, "--json", "--expect-revision", "7")
	got.Problems = nil
	if err := json.Unmarshal([]byte(out), &got); code != 1 || err != nil || got.Code != string(bundle.CodeRevisionConflict) || got.Problems == nil {
		t.Errorf("push at the wrong revision: exit %d, %v, %+v\nstdout %s\nstderr %s", code, err, got, out, errOut)
	}
}

// TestConfigRollbackRefusesRevisionZero: REV 0 names no bundle and is a
// usage error; it used to act as REV left out and restore the parent.
func TestConfigRollbackRefusesRevisionZero(t *testing.T) {
	url := natstest.Start(t).ClientURL()
	examples := filepath.Join("..", "..", "examples")
	for _, root := range []string{examples, otherRoot(t)} {
		if _, errOut, code := configCLI(t, "config", "push", "--root", root, "--nats", url); code != 0 {
			t.Fatalf("push %s: exit %d, %s", root, code, errOut)
		}
	}
	_, errOut, code := configCLI(t, "config", "rollback", "0", "--nats", url)
	if code != 2 || !strings.Contains(errOut, "revision 0 is no bundle") {
		t.Errorf("rollback 0: exit %d, stderr %q; want 2", code, errOut)
	}
	out, _, _ := configCLI(t, "config", "log", "--nats", url, "--json")
	var recs []bundle.Record
	if err := json.Unmarshal([]byte(out), &recs); err != nil || len(recs) != 2 {
		t.Errorf("history after rollback 0: %v, %d records, want the 2 pushes only", err, len(recs))
	}
	// Leaving REV out still restores the parent.
	if out, errOut, code := configCLI(t, "config", "rollback", "--nats", url); code != 0 || !strings.Contains(out, "the bundle of revision 1") {
		t.Errorf("rollback: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestConfigLogEscapesControlCharacters: an actor or message with a
// newline, a tab or an escape sequence is printed escaped in the table;
// it was printed raw, breaking the table and reaching the terminal.
func TestConfigLogEscapesControlCharacters(t *testing.T) {
	url := natstest.Start(t).ClientURL()
	if _, errOut, code := configCLI(t, "config", "push", "--root", filepath.Join("..", "..", "examples"), "--nats", url,
		"-m", "line1\nline2\t\x1b[31mred\u009b", "--actor", "ev\x1b]0;t\x07il"); code != 0 {
		t.Fatalf("push: exit %d, %s", code, errOut)
	}
	out, errOut, code := configCLI(t, "config", "log", "--nats", url)
	if code != 0 {
		t.Fatalf("log: exit %d, %s", code, errOut)
	}
	if strings.ContainsAny(out, "\x1b\x07\t\u009b") || strings.Count(out, "\n") != 2 {
		t.Errorf("log prints a control character raw:\n%q", out)
	}
	if !strings.Contains(out, `line1\nline2\t\x1b[31mred\u009b`) || !strings.Contains(out, `ev\x1b]0;t\ail`) {
		t.Errorf("log:\n%s\nwant the actor and message escaped", out)
	}
}

// TestConfigLogShowsAnUnreadableRecord: a history record that cannot be
// read is a row of its revision with the error and nothing else; it was
// printed as a record of year 1 with empty columns.
func TestConfigLogShowsAnUnreadableRecord(t *testing.T) {
	srv := natstest.Start(t)
	url := srv.ClientURL()
	for _, root := range []string{filepath.Join("..", "..", "examples"), otherRoot(t)} {
		if _, errOut, code := configCLI(t, "config", "push", "--root", root, "--nats", url); code != 0 {
			t.Fatalf("push: exit %d, %s", code, errOut)
		}
	}
	js := natstest.JetStream(t, natstest.Connect(t, srv))
	kv, err := js.KeyValue(context.Background(), bundle.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	out, _, _ := configCLI(t, "config", "log", "--nats", url, "--json")
	var recs []bundle.Record
	if err := json.Unmarshal([]byte(out), &recs); err != nil || len(recs) != 2 {
		t.Fatalf("log --json: %v, %s", err, out)
	}
	older, newer := strconv.FormatUint(recs[1].Revision, 10), strconv.FormatUint(recs[0].Revision, 10)
	if _, err := kv.PutString(context.Background(), bundle.HistoryPrefix+older, "garbage"); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := configCLI(t, "config", "log", "--nats", url)
	if code != 0 {
		t.Fatalf("log: exit %d, %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Contains(out, "0001-01-01") {
		t.Fatalf("log:\n%s\nwant a header and two rows, none dated year 1", out)
	}
	if f := strings.Fields(lines[2]); len(f) < 6 || f[0] != older || !slices.Equal(f[1:5], []string{"-", "-", "-", "-"}) || f[5] != "bundle_malformed:" {
		t.Errorf("row of the older revision: %q, want its revision, four dashes and the bundle_malformed error", lines[2])
	}
	if !strings.HasPrefix(lines[1], newer+" *") {
		t.Errorf("row of the newer revision: %q, want the readable record, marked current", lines[1])
	}
}

// TestWithoutJetStreamSaysWhy: against a server without JetStream every
// command that uses it says what to check; only the config commands and
// tail did, the others printed the client's "no responders available for
// request" (or "no response from stream") alone.
func TestWithoutJetStreamSaysWhy(t *testing.T) {
	url := natstest.Start(t, func(o *server.Options) { o.JetStream = false }).ClientURL()
	examples := filepath.Join("..", "..", "examples")
	task := filepath.Join(examples, "tasks", "incident.json")
	for _, args := range [][]string{
		{"config", "log"}, {"config", "push", "--root", examples}, {"config", "rollback"}, {"tail"},
		{"submit", task}, {"submit", "--wait", task},
		{"replay", "--root", examples}, {"replay", "--root", examples, "--from-bundle"},
		{"explain", "--root", examples, "--id", "x"}, {"explain", "--root", examples, "--task", "src", "x"},
		{"run", "--root", examples, "--service=false"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var stdout, stderr syncBuffer
		code := runContext(ctx, append(args, "--nats", url), strings.NewReader(""), &stdout, &stderr)
		cancel()
		if code == 0 || !strings.HasSuffix(stderr.String(), "(is JetStream enabled on the server, for this account?)\n") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr.String())
		}
		// The drift check's warning, when it comes, says it too.
		for line := range strings.Lines(stderr.String()) {
			if strings.Contains(line, "no responders") && !strings.Contains(line, "is JetStream enabled") {
				t.Errorf("%v: %s", args, line)
			}
		}
	}
}

// TestConfigPushRecordsTheURLUser: the record's user is the NATS user
// also when it comes with the server URL (user:password@host); it was
// left out. A token in the URL is not recorded.
func TestConfigPushRecordsTheURLUser(t *testing.T) {
	srv := natstest.Start(t, func(o *server.Options) { o.Username, o.Password = "ana", "s3cret" })
	u := srv.ClientURL()
	withUser := strings.Replace(u, "nats://", "nats://ana:s3cret@", 1)
	out, errOut, code := configCLI(t, "config", "push", "--root", filepath.Join("..", "..", "examples"), "--nats", withUser, "--json")
	if code != 0 {
		t.Fatalf("push: exit %d, %s", code, errOut)
	}
	var rec bundle.Record
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec.User != "ana" || strings.Contains(out, "s3cret") {
		t.Errorf("record %s (%v), want user ana and no password", out, err)
	}

	tok := natstest.Start(t, func(o *server.Options) { o.Authorization = "tok3n" })
	out, errOut, code = configCLI(t, "config", "push", "--root", filepath.Join("..", "..", "examples"), "--nats", strings.Replace(tok.ClientURL(), "nats://", "nats://tok3n@", 1), "--json")
	if code != 0 || strings.Contains(out, "tok3n") {
		t.Errorf("push with a token: exit %d, stdout %s, stderr %s; want no token in the record", code, out, errOut)
	}
}

// TestConfigPushRefusesNegativeReplicas: --replicas -1 is a usage error
// before anything is stored, as for worker run.
func TestConfigPushRefusesNegativeReplicas(t *testing.T) {
	url := natstest.Start(t).ClientURL()
	_, errOut, code := configCLI(t, "config", "push", "--root", filepath.Join("..", "..", "examples"), "--nats", url, "--replicas=-1")
	if code != 2 || !strings.Contains(errOut, "--replicas must not be negative") {
		t.Errorf("exit %d, stderr %q; want 2", code, errOut)
	}
}
