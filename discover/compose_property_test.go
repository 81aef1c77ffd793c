package discover_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/resolve"
)

// Properties of whole config roots: composing is deterministic, and a
// composed pack resolves exactly like the same pack written flat.

var (
	propRoles  = []string{"architect", "reviewer", "tester"}
	propFields = []string{"model", "effort", "default_modes", "modes_allow", "authority", "boundaries", "escalations"}
	propModes  = []string{"systematic", "evidential", "framing", "slow", "fast"}
)

// layerSet is the entries one pack file writes: role → field → YAML text.
type layerSet map[string]map[string]string

func genLayer(t *rapid.T, label string) layerSet {
	l := layerSet{}
	for _, role := range rapid.SliceOfNDistinct(rapid.SampledFrom(propRoles), 0, 3, rapid.ID).Draw(t, label+".roles") {
		fields := map[string]string{}
		for _, f := range rapid.SliceOfNDistinct(rapid.SampledFrom(propFields), 0, 4, rapid.ID).Draw(t, label+"."+role) {
			switch f {
			case "model", "effort":
				fields[f] = rapid.SampledFrom([]string{"one", "two", "three"}).Draw(t, label+"."+role+"."+f)
			case "default_modes", "modes_allow":
				fields[f] = "[" + strings.Join(rapid.SliceOfNDistinct(rapid.SampledFrom(propModes), 0, 3, rapid.ID).Draw(t, label+"."+role+"."+f), ", ") + "]"
			default:
				fields[f] = "[" + strings.Join(rapid.SliceOfN(rapid.SampledFrom([]string{"a", "b", "c"}), 0, 2).Draw(t, label+"."+role+"."+f), ", ") + "]"
			}
		}
		l[role] = fields
	}
	return l
}

func (l layerSet) yaml(header string) string {
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("roles:\n")
	for _, role := range sortedKeys(l) {
		fmt.Fprintf(&b, "  %s:\n", role)
		if len(l[role]) == 0 {
			b.WriteString("    {}\n")
			continue
		}
		for _, f := range sortedKeys(l[role]) {
			fmt.Fprintf(&b, "    %s: %s\n", f, l[role][f])
		}
	}
	if len(l) == 0 {
		return header + "roles: {}\n"
	}
	return b.String()
}

// shapes are the mixin graphs the property draws from: team's extends, the
// other packs' extends, and the order docs/CONFIG.md gives.
var shapes = []struct {
	name    string
	extends map[string]string
	order   []string
}{
	{"one mixin", map[string]string{"team": "[base]"}, []string{"base", "team"}},
	{"three levels", map[string]string{"team": "[b]", "b": "[a]", "a": "[base]"}, []string{"base", "a", "b", "team"}},
	{"a diamond", map[string]string{"team": "[a, b]", "a": "[base]", "b": "[base]"}, []string{"base", "a", "b", "team"}},
	{"two roots", map[string]string{"team": "[b, a]", "a": "[base]"}, []string{"b", "base", "a", "team"}},
}

func TestComposedResolvesLikeFlat(t *testing.T) {
	tmp := t.TempDir()
	n := 0
	rapid.Check(t, func(t *rapid.T) {
		shape := rapid.SampledFrom(shapes).Draw(t, "shape")
		layers := map[string]layerSet{}
		composed := map[string]string{}
		for _, name := range shape.order {
			layers[name] = genLayer(t, name)
			header := ""
			if ext, ok := shape.extends[name]; ok {
				header = "extends: " + ext + "\n"
			}
			composed["packs/"+name+".yaml"] = layers[name].yaml(header)
		}
		// The flat pack: for each field, the last layer in order that sets
		// it.
		flat := layerSet{}
		for _, name := range shape.order {
			for role, fields := range layers[name] {
				if flat[role] == nil {
					flat[role] = map[string]string{}
				}
				for f, v := range fields {
					flat[role][f] = v
				}
			}
		}
		n++
		dirA, dirB := filepath.Join(tmp, fmt.Sprint(n, "a")), filepath.Join(tmp, fmt.Sprint(n, "b"))
		write := func(dir string, fs files) {
			for rel, content := range fs {
				p := filepath.Join(dir, filepath.FromSlash(rel))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		write(dirA, composed)
		write(dirB, files{"packs/team.yaml": flat.yaml("")})
		a, errA := discover.Load(dirA, discover.Options{})
		b, errB := discover.Load(dirB, discover.Options{})
		if errA != nil || errB != nil {
			t.Fatalf("load: %v / %v", errA, errB)
		}
		pa, pb := a.Packs["team"], b.Packs["team"]
		if pa == nil || pb == nil {
			t.Fatalf("team: %v / %v", a.PackErrors["team"], b.PackErrors["team"])
		}
		if pa.Pack.Digest != pb.Pack.Digest || !reflect.DeepEqual(pa.Pack.Roles, pb.Pack.Roles) {
			t.Fatalf("composed %+v\nflat %+v\n(%s)", pa.Pack.Roles, pb.Pack.Roles, composed)
		}
		tasks := []resolve.TaskOverrides{{}, {Modes: []string{}}, {Model: ptr("task-model"), Modes: []string{"evidential"}}}
		for _, role := range propRoles {
			for _, task := range tasks {
				req := discover.Request{Ref: resolve.RoleName(role), Pack: ptr("team"), Task: task}
				ia, err := a.Inputs(req)
				if err != nil {
					t.Fatalf("composed inputs for %s: %v", role, err)
				}
				ib, err := b.Inputs(req)
				if err != nil {
					t.Fatalf("flat inputs for %s: %v", role, err)
				}
				sa, ea := resolve.Resolve(req.Ref, ia)
				sb, eb := resolve.Resolve(req.Ref, ib)
				if !reflect.DeepEqual(sa, sb) || fmt.Sprint(ea) != fmt.Sprint(eb) {
					t.Fatalf("%s with %+v: composed %v / %v, flat %v / %v", role, task, sa.Model, ea, sb.Model, eb)
				}
			}
		}
	})
}

// Loading one tree twice gives the same snapshot: digests, packs, errors,
// origins; whatever the mixin graph (cycles included).
func TestComposeTwiceIsIdentical(t *testing.T) {
	tmp := t.TempDir()
	n := 0
	names := []string{"a", "b", "c", "d"}
	rapid.Check(t, func(t *rapid.T) {
		fs := files{"rolecall.yaml": "placeholders: {env: [P_*]}\n", "prompts/x.txt": rapid.SampledFrom([]string{"one\n", "two"}).Draw(t, "file")}
		for _, name := range names {
			ext := rapid.SliceOfNDistinct(rapid.SampledFrom(append(names, "default", "ghost")), 0, 2, rapid.ID).Draw(t, name+".extends")
			header := ""
			if len(ext) > 0 {
				header = "extends: [" + strings.Join(ext, ", ") + "]\n"
			}
			if rapid.Bool().Draw(t, name+".placeholder") {
				header += "x-note: \"${file:prompts/x.txt} ${env:P_A}\"\n"
			}
			fs["packs/"+name+".yaml"] = genLayer(t, name).yaml(header)
		}
		n++
		dir := filepath.Join(tmp, fmt.Sprint(n))
		for rel, content := range fs {
			p := filepath.Join(dir, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		env := discover.Options{LookupEnv: envOf(map[string]string{"P_A": "value"})}
		s1, err1 := discover.Load(dir, env)
		s2, err2 := discover.Load(dir, env)
		if err1 != nil || err2 != nil {
			t.Fatalf("load: %v / %v", err1, err2)
		}
		if s1.Digest != s2.Digest || !slices.Equal(s1.Files, s2.Files) {
			t.Fatalf("snapshot digests differ: %s / %s", s1.Digest, s2.Digest)
		}
		if fmt.Sprint(s1.PackErrors) != fmt.Sprint(s2.PackErrors) {
			t.Fatalf("pack errors differ:\n%v\n%v", s1.PackErrors, s2.PackErrors)
		}
		if len(s1.Packs) != len(s2.Packs) {
			t.Fatalf("%d packs, then %d", len(s1.Packs), len(s2.Packs))
		}
		for name, p1 := range s1.Packs {
			p2 := s2.Packs[name]
			if p2 == nil || p1.Pack.Digest != p2.Pack.Digest || p1.FilesDigest != p2.FilesDigest ||
				!reflect.DeepEqual(p1.KeyOrigins, p2.KeyOrigins) || !reflect.DeepEqual(p1.Placeholders, p2.Placeholders) || !slices.Equal(p1.Mixins, p2.Mixins) {
				t.Fatalf("pack %s differs between two loads", name)
			}
		}
	})
}
