package discover_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rolecall/rolecall/discover"
)

func errorStrings(errs []*discover.Error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// TestSnapshotProblemsEqualValidate: a loaded snapshot's Problems are
// exactly what Validate reports for its root, for every test root that
// loads, so the worker reports at start what validate would print; for
// a root that does not load, validate prints the error that stops it.
func TestSnapshotProblemsEqualValidate(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join("testdata", "roots"))
	if err != nil {
		t.Fatal(err)
	}
	withProblems := 0
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			root := copyRoot(t, e.Name())
			// The one profile that stops the load; without it the rest of
			// the root's problems remain.
			if e.Name() == "validate-problems" {
				if err := os.Remove(filepath.Join(root, "agents", "broken.md")); err != nil {
					t.Fatal(err)
				}
			}
			snap, err := discover.Load(root, discover.Options{})
			if err != nil {
				// A root that does not load: Validate reports the same
				// problem among its own.
				if !slices.Contains(errorStrings(discover.Validate(root)), err.Error()) {
					t.Errorf("Load: %v\nnot among Validate's problems:\n%s", err, strings.Join(errorStrings(discover.Validate(root)), "\n"))
				}
				return
			}
			got, want := errorStrings(snap.Problems()), errorStrings(discover.Validate(root))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Problems differ from Validate (-validate +problems):\n%s", diff)
			}
			if len(got) > 0 {
				withProblems++
			}
		})
	}
	if withProblems < 2 {
		t.Errorf("only %d loadable roots have problems; the comparison proves little", withProblems)
	}
}

// TestRunnableRootWithProblems: the case the worker must not start
// silently with: a root that loads (so a worker serves it) while a pack's
// default Modes do not exist, which fails every task that selects it.
func TestRunnableRootWithProblems(t *testing.T) {
	root := copyRoot(t, "")
	writeFile(t, root, "packs/team.yaml", "roles:\n  analyst:\n    model: m\n    default_modes: [evidential, telepathic]\n")
	snap, err := discover.Load(root, discover.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`packs/team.yaml:4: pack_default_invalid: pack "team" default_modes for role "analyst": mode "telepathic" is not in the catalog`}
	if diff := cmp.Diff(want, errorStrings(snap.Problems())); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestProfileFlagFalseIgnored(t *testing.T) {
	root := copyRoot(t, "")
	writeFile(t, root, "agents/careful.md", "---\ndisposition: replacement\nyolo: false\nbypass: true\nfast_mode: false\nlion_system: false\n---\nBody.\n")
	writeFile(t, root, "agents/plain.md", "---\ndisposition: replacement\nbypass: false\n---\nBody.\n")
	rep, err := discover.Check(root, discover.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 0 {
		t.Errorf("problems %v, want none: a diagnostic changes nothing", rep.Problems)
	}
	var got []string
	for _, d := range rep.Diagnostics {
		got = append(got, d.Error())
	}
	want := []string{
		`agents/careful.md:3: profile_flag_false_ignored: profile "careful" sets yolo: false, which is ignored: a profile can only switch yolo on, so the task's value or rolecall.yaml's defaults.yolo decides; remove the line`,
		`agents/careful.md:5: profile_flag_false_ignored: profile "careful" sets fast_mode: false, which is ignored: a profile can only switch fast_mode on, so the task's value or rolecall.yaml's defaults.fast_mode decides; remove the line`,
		`agents/plain.md:3: profile_flag_false_ignored: profile "plain" sets bypass: false, which is ignored: a profile can only switch bypass on, so the task's value or rolecall.yaml's defaults.bypass decides; remove the line`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s", diff)
	}
	if d := discover.Diagnostics(root); !slices.EqualFunc(d, rep.Diagnostics, func(a, b *discover.Error) bool { return a.Error() == b.Error() }) {
		t.Errorf("Diagnostics %v, want Check's %v", d, rep.Diagnostics)
	}
}

func TestCheckCannotOpenRoot(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{missing, file} {
		if _, err := discover.Check(root, discover.Options{}); err == nil || !strings.Contains(err.Error(), "cannot open the config root") {
			t.Errorf("Check(%s) error %v, want the root cannot be opened", root, err)
		}
	}
}
