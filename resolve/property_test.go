package resolve_test

import (
	"errors"
	"fmt"
	"path"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/rolecall/rolecall/materialize"
	"github.com/rolecall/rolecall/resolve"
)

// Generators for random but well-formed inputs: small catalogs and packs,
// an optional profile of each disposition, and overrides that are nil,
// empty or non-empty slices and nil/true/false pointers. Pools are small so
// that names collide often (overlay base_role matching the Role, Modes in
// both allowlist and defaults, conflicting pairs), which is where the
// interesting behaviour is. rapid leans towards small values (0, false,
// the first element), so the common, well-formed case is the small one and
// rare() marks the unusual one.

var (
	poolRoles    = []string{"architect", "reviewer", "scout"}
	poolModes    = []string{"fast", "slow", "systematic", "premortem", "socratic"}
	poolProfiles = []string{"tuned", "ghostwriter", "architect"}
	// The long text puts a profile's body over the length at which a
	// Plan keeps the digest's hash state (resolve.cloneMin).
	poolTexts = []string{"", " ", "\n\n", "Body text.", "  Padded block.\n\n", "Line one.\n\nLine two.", "ünïcode ✓",
		strings.Repeat("A long profile body, sentence after sentence. ", 30)}
	poolLines  = []string{"Decide.", "Do not merge.", "Escalate on conflict.", "Ask first."}
	poolTiers  = []string{"strong", "balanced", "cheap"}
	poolModels = []string{"pack-model", "big-model", "tier:strong", "tier:balanced", "tier:cheap", "tier:huge"}
	poolSkills = []string{"adr-writing", "code-review", "diagramming", "test-plans"}
	poolGlobs  = []string{"*", "adr-*", "*-review", "diagramming", "code-*", "test-plans", "t*", "zzz-*"}
)

// rare is true for about one draw in n+1 (more often while shrinking).
func rare(t *rapid.T, label string, n int) bool { return rapid.IntRange(0, n).Draw(t, label) == n }

func drawList(t *rapid.T, label string, pool []string) []string {
	switch rapid.IntRange(0, 3).Draw(t, label+".shape") {
	case 0:
		return nil
	case 1:
		return []string{}
	default:
		return rapid.SliceOfN(rapid.SampledFrom(pool), 1, 3).Draw(t, label)
	}
}

func drawOptString(t *rapid.T, label string, pool ...string) *string {
	if rapid.Bool().Draw(t, label+".set") {
		return ptr(rapid.SampledFrom(pool).Draw(t, label))
	}
	return nil
}

func drawOptBool(t *rapid.T, label string) *bool {
	return rapid.SampledFrom([]*bool{nil, ptr(true), ptr(false)}).Draw(t, label)
}

func drawText(t *rapid.T, label string) string { return rapid.SampledFrom(poolTexts).Draw(t, label) }

// drawAnyMap draws a JSON-like mapping (float64 numbers, as JSON decoding
// gives): nil, empty, or a few nested values.
func drawAnyMap(t *rapid.T, label string) map[string]any {
	switch rapid.IntRange(0, 3).Draw(t, label+".shape") {
	case 0:
		return nil
	case 1:
		return map[string]any{}
	}
	m := map[string]any{}
	for _, k := range rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"format", "path", "n", "strict", "tags", "nested"}), 1, 4, func(s string) string { return s }).Draw(t, label+".keys") {
		switch k {
		case "n":
			m[k] = float64(rapid.IntRange(0, 9).Draw(t, label+".n"))
		case "strict":
			m[k] = rapid.Bool().Draw(t, label+".strict")
		case "tags":
			tags := []any{}
			for _, s := range rapid.SliceOfN(rapid.SampledFrom(poolLines), 0, 2).Draw(t, label+".tags") {
				tags = append(tags, s)
			}
			m[k] = tags
		case "nested":
			m[k] = map[string]any{"inner": drawText(t, label+".inner"), "list": []any{1.0, "two"}}
		default:
			m[k] = drawText(t, label+"."+k)
		}
	}
	return m
}

func drawPolicy(t *rapid.T, label string) *resolve.PermissionPolicy {
	if !rapid.Bool().Draw(t, label+".set") {
		return nil
	}
	rules := func(l string) map[string][]string {
		switch rapid.IntRange(0, 2).Draw(t, l+".shape") {
		case 0:
			return nil
		case 1:
			return map[string][]string{}
		}
		return map[string][]string{"bash": drawList(t, l+".bash", []string{"*", "rm *", "git *"}), "edit": {"**/*.go"}}
	}
	return &resolve.PermissionPolicy{
		Mode:     rapid.SampledFrom([]resolve.PermissionMode{resolve.PermissionAllowAll, resolve.PermissionDenyAll, resolve.PermissionRules}).Draw(t, label+".mode"),
		Allow:    rules(label + ".allow"),
		Deny:     rules(label + ".deny"),
		Escalate: rules(label + ".escalate"),
	}
}

func drawCatalog(t *rapid.T) *resolve.Catalog {
	c := &resolve.Catalog{Roles: map[string]resolve.Role{}, Modes: map[string]resolve.Mode{}}
	for _, name := range poolRoles {
		if rare(t, "role."+name+".absent", 19) {
			continue
		}
		c.Roles[name] = resolve.Role{
			Name: name, Description: "The " + name + ".",
			Body:             drawText(t, "role."+name+".body"),
			Emits:            drawList(t, "role."+name+".emits", []string{"review", "design_doc", "adr"}),
			ArtifactDefaults: drawAnyMap(t, "role."+name+".artifacts"),
		}
	}
	for _, name := range poolModes {
		if rare(t, "mode."+name+".absent", 9) {
			continue
		}
		var conflicts []string
		if rare(t, "mode."+name+".conflicts?", 3) {
			conflicts = drawList(t, "mode."+name+".conflicts", poolModes)
		}
		c.Modes[name] = resolve.Mode{Name: name, Description: name, Behaviors: drawText(t, "mode."+name+".behaviors"), ConflictsWith: conflicts}
	}
	return c
}

func drawPack(t *rapid.T) *resolve.Pack {
	if rare(t, "pack.nil", 19) {
		return nil
	}
	p := &resolve.Pack{Name: rapid.SampledFrom([]string{"default", "team"}).Draw(t, "pack.name"), Roles: map[string]resolve.PackEntry{}}
	for _, name := range append(slices.Clone(poolRoles), "ghostwriter") {
		if rare(t, "entry."+name+".absent", 9) {
			continue
		}
		l := "entry." + name
		e := resolve.PackEntry{
			Model:  drawOptString(t, l+".model", poolModels...),
			Effort: drawOptString(t, l+".effort", "low", "high"),
			Active: rapid.SampledFrom([]*bool{nil, nil, nil, ptr(true), ptr(false)}).Draw(t, l+".active"),
		}
		if rapid.Bool().Draw(t, l+".defaults?") {
			e.DefaultModes = drawList(t, l+".defaults", append(slices.Clone(poolModes), "ghost"))
		}
		if rapid.Bool().Draw(t, l+".allow?") {
			e.ModesAllow = drawList(t, l+".allow", poolModes)
		}
		e.Authority = drawList(t, l+".authority", poolLines)
		e.Boundaries = drawList(t, l+".boundaries", poolLines)
		e.Escalations = drawList(t, l+".escalations", poolLines)
		e.Tiers = drawList(t, l+".tiers", poolTiers)
		e.Skills = drawList(t, l+".skills", poolGlobs)
		for i := range rapid.IntRange(0, 2).Draw(t, l+".variants") {
			v := resolve.Variant{}
			for j := range rapid.IntRange(0, 2).Draw(t, fmt.Sprintf("%s.v%d.when", l, i)) {
				k := fmt.Sprintf("%s.v%d.c%d", l, i, j)
				v.When = append(v.When, resolve.Condition{
					Key:   rapid.SampledFrom([]string{"model", "tier", "pack", "role"}).Draw(t, k+".key"),
					Value: rapid.SampledFrom([]string{"pack-model", "big-*", "tier:*", "tier:cheap", "team", "architect", "*"}).Draw(t, k+".value"),
					Glob:  rapid.Bool().Draw(t, k+".glob"),
				})
			}
			k := fmt.Sprintf("%s.v%d.set", l, i)
			v.Set = resolve.VariantSet{
				Effort:       drawOptString(t, k+".effort", "variant-effort"),
				DefaultModes: drawList(t, k+".defaults", poolModes),
				ModesAllow:   drawList(t, k+".allow", poolModes),
				Authority:    drawList(t, k+".authority", poolLines),
				Skills:       drawList(t, k+".skills", poolGlobs),
			}
			e.Variants = append(e.Variants, v)
		}
		p.Roles[name] = e
	}
	return p
}

// drawProfile draws no profile, or one of each disposition; base_role is
// biased towards the requested Role so overlays often apply.
func drawProfile(t *rapid.T, ref resolve.RoleRef) *resolve.ExternalProfile {
	dispositions := []string{"none", "none", "overlay", "overlay", "overlay", "replacement", "legacy"}
	if _, ext := ref.(resolve.ExternalRef); ext {
		dispositions = []string{"replacement", "replacement", "legacy", "overlay", "none"}
	}
	disp := rapid.SampledFrom(dispositions).Draw(t, "profile.disposition")
	if disp == "none" {
		return nil
	}
	p := &resolve.ExternalProfile{
		Description: "A profile.",
		Model:       drawOptString(t, "profile.model", "profile-model"),
		Effort:      drawOptString(t, "profile.effort", "medium"),
		Yolo:        drawOptBool(t, "profile.yolo"),
		Bypass:      drawOptBool(t, "profile.bypass"),
		FastMode:    drawOptBool(t, "profile.fast_mode"),
		LionSystem:  drawOptBool(t, "profile.lion_system"),
		Enabled:     rapid.SampledFrom([]*bool{nil, nil, nil, ptr(true), ptr(true), ptr(false)}).Draw(t, "profile.enabled"),
		Body:        drawText(t, "profile.body"),
	}
	p.ArtifactDefaults = drawAnyMap(t, "profile.artifacts")
	if rapid.Bool().Draw(t, "profile.timeout?") {
		p.Timeout = ptr(rapid.IntRange(1, 3600).Draw(t, "profile.timeout"))
	}
	p.ResumeOnTimeout = rare(t, "profile.resume", 3)
	switch disp {
	case "overlay":
		p.Disposition = resolve.DispositionOverlay
		p.Name = rapid.SampledFrom(poolProfiles).Draw(t, "profile.name")
		base := rapid.SampledFrom([]string{ref.Token(), ref.Token(), ref.Token(), "reviewer", ""}).Draw(t, "profile.base")
		if base != "" {
			p.BaseRole = &base
		}
	default:
		p.Disposition = resolve.DispositionReplacement
		if disp == "legacy" {
			p.Disposition = resolve.DispositionLegacy
		}
		name := strings.TrimPrefix(ref.Token(), resolve.ExternalPrefix)
		p.Name = rapid.SampledFrom([]string{name, name, name, name, name, "other"}).Draw(t, "profile.name")
		if rare(t, "profile.base?", 5) {
			p.BaseRole = ptr("architect")
		}
	}
	return p
}

func drawTask(t *rapid.T) resolve.TaskOverrides {
	var modes []string
	switch rapid.IntRange(0, 3).Draw(t, "task.modes.shape") {
	case 1:
		modes = []string{}
	case 2, 3:
		modes = rapid.SliceOfN(rapid.SampledFrom(append(slices.Clone(poolModes), "ghost")), 1, 3).Draw(t, "task.modes")
	}
	return resolve.TaskOverrides{
		Skills:      drawList(t, "task.skills", poolGlobs),
		Model:       drawOptString(t, "task.model", "task-model", "tier:balanced", "tier:strong"),
		Effort:      drawOptString(t, "task.effort", "low", "high"),
		Modes:       modes,
		ExtraPrompt: drawOptString(t, "task.extra", "", "  \n", "Extra instructions.", "\n Padded extra. \n"),
		Tools:       drawList(t, "task.tools", []string{"read", "edit", "bash"}),
		Permissions: drawPolicy(t, "task.permissions"),
		Yolo:        drawOptBool(t, "task.yolo"),
		Bypass:      drawOptBool(t, "task.bypass"),
		FastMode:    drawOptBool(t, "task.fast_mode"),
		LionSystem:  drawOptBool(t, "task.lion_system"),
	}
}

type scenario struct {
	ref resolve.RoleRef
	in  resolve.Inputs
}

var genScenario = rapid.Custom(func(t *rapid.T) scenario {
	var ref resolve.RoleRef
	if rare(t, "ref.external", 2) {
		ref = resolve.ExternalRef{Name: rapid.SampledFrom(poolProfiles).Draw(t, "ref.name")}
	} else {
		ref = resolve.RoleName(rapid.SampledFrom(append(slices.Clone(poolRoles), "architect", "reviewer", "ghost")).Draw(t, "ref.name"))
	}
	in := resolve.Inputs{
		Catalog:       drawCatalog(t),
		Pack:          drawPack(t),
		PackSelection: rapid.SampledFrom([]resolve.PackSelection{resolve.PackFromTask, resolve.PackFromWorkerDefault}).Draw(t, "pack.selection"),
		Profile:       drawProfile(t, ref),
		Task:          drawTask(t),
		Defaults: resolve.RuntimeDefaults{
			Model:       rapid.SampledFrom([]*string{ptr("runtime-model"), ptr("runtime-model"), ptr("runtime-model"), nil}).Draw(t, "defaults.model"),
			Effort:      drawOptString(t, "defaults.effort", "medium"),
			Tools:       drawList(t, "defaults.tools", []string{"read", "grep"}),
			Permissions: drawPolicy(t, "defaults.permissions"),
			Yolo:        rapid.Bool().Draw(t, "defaults.yolo"),
			Bypass:      rapid.Bool().Draw(t, "defaults.bypass"),
			FastMode:    rapid.Bool().Draw(t, "defaults.fast_mode"),
			LionSystem:  rapid.Bool().Draw(t, "defaults.lion_system"),
		},
		Policy: resolve.Policy{RejectLegacyProfiles: rare(t, "policy.reject", 3)},
	}
	if !rare(t, "models.nil", 5) {
		m := &resolve.ModelCatalog{Tiers: map[string]*string{}, AllowFallback: rapid.Bool().Draw(t, "models.fallback?")}
		for _, tier := range poolTiers {
			if !rare(t, "models."+tier+".absent", 9) {
				m.Tiers[tier] = rapid.SampledFrom([]*string{ptr("model-" + tier), ptr("model-" + tier), nil}).Draw(t, "models."+tier)
			}
		}
		m.Fallback = drawList(t, "models.order", poolTiers)
		in.Models = m
	}
	for _, name := range poolSkills {
		if !rare(t, "skill."+name+".absent", 4) {
			in.Skills = append(in.Skills, resolve.Skill{Name: name, Source: "root", Digest: "sha256:" + name})
		}
	}
	in.Explain = rapid.Bool().Draw(t, "explain")
	return scenario{ref, in}
})

// drawResolved draws scenarios until one resolves, for the properties of
// a successful result: about one scenario in fifteen resolves (the rest
// are the error cases the other properties cover), so drawing one per
// check left those properties a handful of cases per run, and the tier
// and skill branches some runs none at all.
func drawResolved(t *rapid.T) (scenario, resolve.ResolvedAgentSpec) {
	for i := range 60 {
		sc := genScenario.Draw(t, fmt.Sprintf("scenario%d", i))
		if spec, err := resolve.Resolve(sc.ref, sc.in); err == nil {
			return sc, spec
		}
	}
	t.Skip("no scenario resolved")
	panic("unreachable")
}

// --- reflection helpers -------------------------------------------------

// deepCopy copies v with no shared slice, map or pointer, keeping nil and
// empty apart. It works by reflection so a field added later is copied too.
func deepCopy[V any](v V) V {
	var out V
	copyValue(reflect.ValueOf(&out).Elem(), reflect.ValueOf(&v).Elem())
	return out
}

func copyValue(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if !src.IsNil() {
			n := reflect.New(src.Type().Elem())
			copyValue(n.Elem(), src.Elem())
			dst.Set(n)
		}
	case reflect.Slice:
		if !src.IsNil() {
			n := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
			for i := range src.Len() {
				copyValue(n.Index(i), src.Index(i))
			}
			dst.Set(n)
		}
	case reflect.Map:
		if !src.IsNil() {
			n := reflect.MakeMapWithSize(src.Type(), src.Len())
			for it := src.MapRange(); it.Next(); {
				v := reflect.New(src.Type().Elem()).Elem()
				copyValue(v, it.Value())
				n.SetMapIndex(it.Key(), v)
			}
			dst.Set(n)
		}
	case reflect.Interface:
		if !src.IsNil() {
			v := reflect.New(src.Elem().Type()).Elem()
			copyValue(v, src.Elem())
			dst.Set(v)
		}
	case reflect.Struct:
		for i := range src.NumField() {
			copyValue(dst.Field(i), src.Field(i))
		}
	default:
		dst.Set(src)
	}
}

// scribble overwrites in place everything reachable from v: every string,
// bool and number, every slice element up to the slice's capacity (so a
// result that shares spare capacity with an input is caught), every map
// value (plus one new key), the contents of interfaces and pointers. If a
// result aliases an input or another result, the scribble shows there.
func scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			scribble(v.Elem())
		}
	case reflect.Slice:
		full := v.Slice(0, v.Cap())
		for i := range full.Len() {
			scribble(full.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		for _, k := range v.MapKeys() {
			c := reflect.New(v.Type().Elem()).Elem()
			c.Set(v.MapIndex(k))
			scribble(c)
			v.SetMapIndex(k, c)
		}
		if v.Type().Key().Kind() == reflect.String {
			v.SetMapIndex(reflect.ValueOf("~scribbled").Convert(v.Type().Key()), reflect.Zero(v.Type().Elem()))
		}
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		c := reflect.New(v.Elem().Type()).Elem()
		c.Set(v.Elem())
		scribble(c)
		if v.CanSet() {
			v.Set(c)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				scribble(v.Field(i))
			}
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString(v.String() + "~scribbled")
		}
	case reflect.Bool:
		if v.CanSet() {
			v.SetBool(!v.Bool())
		}
	case reflect.Int:
		if v.CanSet() {
			v.SetInt(v.Int() + 7)
		}
	case reflect.Float64:
		if v.CanSet() {
			v.SetFloat(v.Float() + 1.5)
		}
	}
}

// mutator applies the k-th single-field change of a walk over a value, so
// a test can change one field at a time: a pointer set or cleared, a slice
// or map nil↔empty, grown, or shrunk, a map key deleted, a string, bool or
// number changed. Fields named Digest (a trusted cache, not content) are
// skipped. Map keys are walked in sorted order so k is stable.
type mutator struct {
	k, n int
	path []string
	done string // path of the applied change, "" while none
}

func (m *mutator) site(what string) bool {
	m.n++
	if m.n-1 != m.k {
		return false
	}
	m.done = strings.Join(m.path, "") + ": " + what
	return true
}

func (m *mutator) walk(v reflect.Value) {
	if m.done != "" {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			if m.site("nil → set") {
				n := reflect.New(v.Type().Elem())
				if n.Elem().Kind() == reflect.String {
					n.Elem().SetString("mut")
				}
				v.Set(n)
			}
			return
		}
		if m.site("set → nil") {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		m.walk(v.Elem())
	case reflect.Slice:
		if v.IsNil() {
			if m.site("nil → []") {
				v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			}
			return
		}
		if m.site("→ nil") {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		if m.site("append") {
			v.Set(reflect.Append(v, seed(v.Type().Elem())))
			return
		}
		for i := range v.Len() {
			m.path = append(m.path, fmt.Sprintf("[%d]", i))
			m.walk(v.Index(i))
			m.path = m.path[:len(m.path)-1]
		}
	case reflect.Map:
		if v.IsNil() {
			if m.site("nil → {}") {
				v.Set(reflect.MakeMap(v.Type()))
			}
			return
		}
		if m.site("→ nil") {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		if m.site("add key") {
			v.SetMapIndex(reflect.ValueOf("zz-mut"), seed(v.Type().Elem()))
			return
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, k := range keys {
			m.path = append(m.path, fmt.Sprintf("[%q]", k.String()))
			if m.site("delete key") {
				v.SetMapIndex(k, reflect.Value{})
			} else {
				c := reflect.New(v.Type().Elem()).Elem()
				c.Set(v.MapIndex(k))
				m.walk(c)
				if m.done != "" {
					v.SetMapIndex(k, c)
				}
			}
			m.path = m.path[:len(m.path)-1]
			if m.done != "" {
				return
			}
		}
	case reflect.Interface:
		if v.IsNil() {
			if m.site("nil → value") {
				v.Set(reflect.ValueOf("mut"))
			}
			return
		}
		c := reflect.New(v.Elem().Type()).Elem()
		c.Set(v.Elem())
		m.walk(c)
		if m.done != "" {
			v.Set(c)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.Name == "Digest" || f.Name == "Explain" { // a trusted cache; a request that decides nothing
				continue
			}
			m.path = append(m.path, "."+f.Name)
			m.walk(v.Field(i))
			m.path = m.path[:len(m.path)-1]
		}
	case reflect.String:
		if m.site("change") {
			v.SetString(v.String() + "~")
		}
	case reflect.Bool:
		if m.site("flip") {
			v.SetBool(!v.Bool())
		}
	case reflect.Int:
		if m.site("change") {
			v.SetInt(v.Int() + 1)
		}
	case reflect.Float64:
		if m.site("change") {
			v.SetFloat(v.Float() + 1)
		}
	default:
		panic("mutator: unhandled kind " + v.Kind().String() + " at " + strings.Join(m.path, ""))
	}
}

// seed is a new element for an append or an added map key.
func seed(t reflect.Type) reflect.Value {
	v := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.String:
		v.SetString("mut")
	case reflect.Interface:
		v.Set(reflect.ValueOf("mut"))
	}
	return v
}

// mutateRef gives the k-th change of the role reference: the name, or the
// kind (bare ↔ external) with the same name.
func mutateRef(ref resolve.RoleRef, k int) (resolve.RoleRef, string, bool) {
	switch r := ref.(type) {
	case resolve.RoleName:
		switch k {
		case 0:
			return r + "x", "ref: name", true
		case 1:
			return resolve.ExternalRef{Name: string(r)}, "ref: bare → external", true
		}
	case resolve.ExternalRef:
		switch k {
		case 0:
			return resolve.ExternalRef{Name: r.Name + "x"}, "ref: name", true
		case 1:
			return resolve.RoleName(r.Name), "ref: external → bare", true
		}
	}
	return nil, "", false
}

// --- properties ---------------------------------------------------------

func TestPropertyHelpersAreDeep(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sc := genScenario.Draw(t, "scenario")
		before := deepCopy(sc.in)
		if diff := cmp.Diff(sc.in, before); diff != "" {
			t.Fatalf("deepCopy changed the value:\n%s", diff)
		}
		c := deepCopy(sc.in)
		scribble(reflect.ValueOf(&c).Elem())
		if cmp.Equal(c, sc.in) {
			t.Fatalf("scribble changed nothing")
		}
		if diff := cmp.Diff(before, sc.in); diff != "" {
			t.Fatalf("scribbling a deep copy changed the original:\n%s", diff)
		}
	})
}

func TestPropertyDeterminism(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sc := genScenario.Draw(t, "scenario")
		r1, e1 := resolve.Resolve(sc.ref, sc.in)
		r2, e2 := resolve.Resolve(sc.ref, sc.in)
		if diff := cmp.Diff(r1, r2); diff != "" {
			t.Fatalf("results differ (-first +second):\n%s", diff)
		}
		if diff := cmp.Diff(e1, e2); diff != "" {
			t.Fatalf("errors differ (-first +second):\n%s", diff)
		}
		// and against an equal, separately allocated copy of the inputs
		r3, e3 := resolve.Resolve(sc.ref, deepCopy(sc.in))
		if diff := cmp.Diff(r1, r3); diff != "" {
			t.Fatalf("results for a deep copy differ:\n%s", diff)
		}
		if diff := cmp.Diff(e1, e3); diff != "" {
			t.Fatalf("errors for a deep copy differ:\n%s", diff)
		}
	})
}

func TestPropertyNoInputMutation(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sc := genScenario.Draw(t, "scenario")
		before := deepCopy(sc.in)
		spec, err := resolve.Resolve(sc.ref, sc.in)
		_ = resolve.InputsDigest(sc.ref, sc.in)
		if diff := cmp.Diff(before, sc.in); diff != "" {
			t.Fatalf("Resolve mutated its inputs (-before +after):\n%s", diff)
		}
		if err != nil {
			return
		}
		specBefore := deepCopy(spec)
		_, _ = materialize.Materialize(&spec, "preamble")
		_, _ = materialize.AgentSpecFromResolved(&spec)
		if diff := cmp.Diff(specBefore, spec); diff != "" {
			t.Fatalf("materialize mutated the resolved spec (-before +after):\n%s", diff)
		}
	})
}

func TestPropertyResultIsolation(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sc := genScenario.Draw(t, "scenario")
		before := deepCopy(sc.in)
		r0, e0 := resolve.Resolve(sc.ref, sc.in)
		r1, e1 := resolve.Resolve(sc.ref, sc.in)
		scribble(reflect.ValueOf(&r1).Elem())
		scribble(reflect.ValueOf(e1))
		if e1 == nil {
			m, err := materialize.Materialize(&r0, "preamble")
			if err == nil {
				scribble(reflect.ValueOf(&m).Elem())
			}
		}
		r2, e2 := resolve.Resolve(sc.ref, sc.in)
		if diff := cmp.Diff(before, sc.in); diff != "" {
			t.Fatalf("scribbling a result changed the inputs (-before +after):\n%s", diff)
		}
		if diff := cmp.Diff(r0, r2); diff != "" {
			t.Fatalf("scribbling one result changed another (-untouched +fresh):\n%s", diff)
		}
		if diff := cmp.Diff(e0, e2); diff != "" {
			t.Fatalf("scribbling one error changed another:\n%s", diff)
		}
	})
}

func TestPropertyInputsDigest(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sc := genScenario.Draw(t, "scenario")
		d0 := resolve.InputsDigest(sc.ref, sc.in)
		if !strings.HasPrefix(d0, resolve.DigestPrefix) || len(d0) != len(resolve.DigestPrefix)+64 {
			t.Fatalf("digest %q is not sha256:<64 hex>", d0)
		}
		if d := resolve.InputsDigest(sc.ref, sc.in); d != d0 {
			t.Fatalf("digest not stable: %s then %s", d0, d)
		}
		if d := resolve.InputsDigest(sc.ref, deepCopy(sc.in)); d != d0 {
			t.Fatalf("equal inputs, different digests: %s vs %s", d0, d)
		}
		// Sealing trusts a precomputed digest; it must be the same one.
		sealed := deepCopy(sc.in)
		if sealed.Catalog != nil {
			c := sealed.Catalog.Seal()
			sealed.Catalog = &c
		}
		if sealed.Pack != nil {
			p := sealed.Pack.Seal()
			sealed.Pack = &p
		}
		if d := resolve.InputsDigest(sc.ref, sealed); d != d0 {
			t.Fatalf("sealed inputs digest %s, unsealed %s", d, d0)
		}
		for k := 0; ; k++ {
			ref, what, ok := mutateRef(sc.ref, k)
			if !ok {
				break
			}
			if resolve.InputsDigest(ref, sc.in) == d0 {
				t.Fatalf("digest unchanged after %s", what)
			}
		}
		sites := 0
		for k := 0; ; k++ {
			c := deepCopy(sc.in)
			m := &mutator{k: k}
			m.walk(reflect.ValueOf(&c).Elem())
			if m.done == "" {
				break
			}
			sites++
			if resolve.InputsDigest(sc.ref, c) == d0 {
				t.Fatalf("digest unchanged after changing %s", m.done)
			}
		}
		if sites < 20 {
			t.Fatalf("only %d mutation sites; the mutator is not walking the inputs", sites)
		}
	})
}

// TestPropertyAdapter is The adapter test over random inputs: for
// every successful casts or overlay result the Role-backed AgentSpec
// rebuilds prompt_body exactly; a replacement is refused by the adapter and
// installed verbatim by Materialize.
func TestPropertyAdapter(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sc := genScenario.Draw(t, "scenario")
		spec, err := resolve.Resolve(sc.ref, sc.in)
		if err != nil {
			var re *resolve.ResolutionError
			if !errors.As(err, &re) || !slices.Contains(resolve.ResolverCodes(), re.Code) || re.Details == nil {
				t.Fatalf("error %#v is not a resolver *ResolutionError with details", err)
			}
			return
		}
		m, err := materialize.Materialize(&spec, "PREAMBLE")
		if err != nil {
			t.Fatalf("Materialize: %v", err)
		}
		wantMsg := spec.PromptBody
		switch {
		case spec.LionSystem && spec.PromptBody == "":
			wantMsg = "PREAMBLE"
		case spec.LionSystem:
			wantMsg = "PREAMBLE\n\n" + spec.PromptBody
		}
		if m.SystemMessage != wantMsg {
			t.Fatalf("system message %q, want %q", m.SystemMessage, wantMsg)
		}
		as, err := materialize.AgentSpecFromResolved(&spec)
		if spec.PromptDisposition == resolve.PromptReplacement {
			var me *materialize.Error
			if !errors.As(err, &me) || me.Code != resolve.CodeMaterializeFailed {
				t.Fatalf("AgentSpecFromResolved(replacement) error = %v, want materialize_failed", err)
			}
			if m.RawPrompt != spec.PromptBody || m.Spec != nil {
				t.Fatalf("replacement materialized as %+v", m)
			}
			if len(spec.PromptOverlays) != 0 || spec.GrantRoleEmission || len(spec.Emits) != 0 || len(spec.Identity.Modes) != 0 {
				t.Fatalf("replacement carries casts data: %+v", spec)
			}
			return
		}
		if err != nil {
			t.Fatalf("AgentSpecFromResolved: %v", err)
		}
		if got := as.BuildSystemMessage(); got != spec.PromptBody {
			t.Fatalf("rebuilt prompt differs:\n got %q\nwant %q", got, spec.PromptBody)
		}
		for _, o := range spec.PromptOverlays {
			if o == "" || o != strings.TrimSpace(o) {
				t.Fatalf("overlay %q is empty or untrimmed", o)
			}
		}
	})
}

// TestPropertyShape: every successful result has every source set, and
// never a nil list where the spec promises a list.
func TestPropertyShape(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sc, spec := drawResolved(t)
		for _, kv := range spec.Sources.Fields() {
			if kv[1] == "" {
				t.Fatalf("sources.%s is empty", kv[0])
			}
		}
		if spec.Tools == nil || spec.PromptOverlays == nil || spec.Emits == nil || spec.Identity.Modes == nil || spec.Diagnostics == nil {
			t.Fatalf("nil list in %+v", spec)
		}
		if spec.Model == "" || !spec.Active {
			t.Fatalf("model %q active %v", spec.Model, spec.Active)
		}
		if (sc.in.Task.Modes != nil) != (spec.Sources.Modes == resolve.SourceTask) && spec.Identity.Kind == resolve.IdentityCasts {
			t.Fatalf("task modes %v but sources.modes %q", sc.in.Task.Modes, spec.Sources.Modes)
		}
	})
}

// TestPropertyTiers: tier expansion is deterministic, and the model it
// yields is always one the catalog names (never invented), reached by the
// symbol's own tier or a fallback tier that has it. Fallback is rare in
// drawn scenarios, so every expanded tier is also withdrawn from its
// catalog (fallback allowed, in a drawn order) and resolved again: that
// resolves by a fallback tier or not at all.
func TestPropertyTiers(t *testing.T) {
	var expanded, fellBack int
	rapid.Check(t, func(t *rapid.T) {
		sc, got := drawResolved(t)
		again, _ := resolve.Resolve(sc.ref, deepCopy(sc.in))
		if diff := cmp.Diff(got.ModelTier, again.ModelTier); diff != "" || got.Model != again.Model {
			t.Fatalf("tier expansion is not deterministic:\n%s", diff)
		}
		tier := checkTier(t, sc.in, got)
		if tier == "" {
			return
		}
		expanded++
		in := deepCopy(sc.in)
		in.Models.Tiers[tier] = nil
		in.Models.AllowFallback = true
		in.Models.Fallback = rapid.Permutation(poolTiers).Draw(t, "fallback.order")
		fb, err := resolve.Resolve(sc.ref, in)
		if err != nil {
			return
		}
		if fb.ModelTier == nil || fb.ModelTier.ResolvedVia != "fallback:"+checkTier(t, in, fb) {
			t.Fatalf("tier %q withdrawn, yet resolved %q via %+v", tier, fb.Model, fb.ModelTier)
		}
		fellBack++
	})
	if expanded == 0 || fellBack == 0 {
		t.Errorf("%d tier expansions, %d by a fallback tier: the generator no longer reaches tier expansion", expanded, fellBack)
	}
}

// checkTier holds got's tier expansion to the catalog and returns the
// tier whose model got holds, or "" when no tier was expanded.
func checkTier(t *rapid.T, in resolve.Inputs, got resolve.ResolvedAgentSpec) string {
	mt := got.ModelTier
	if mt == nil {
		if strings.HasPrefix(got.Model, resolve.TierPrefix) {
			t.Fatalf("model %q is a tier symbol left unexpanded", got.Model)
		}
		return ""
	}
	tier := strings.TrimPrefix(mt.ResolvedVia, "fallback:")
	if mt.ResolvedVia == "tier" {
		tier = strings.TrimPrefix(mt.Symbol, resolve.TierPrefix)
	}
	m := in.Models.Tiers[tier]
	if m == nil || *m != got.Model {
		t.Fatalf("model %q via %s is not the catalog's model of tier %q (%v)", got.Model, mt.ResolvedVia, tier, m)
	}
	if strings.HasPrefix(mt.ResolvedVia, "fallback:") && !in.Models.AllowFallback {
		t.Fatalf("fell back to %s with fallback not allowed", tier)
	}
	if mt.CatalogDigest != resolve.ModelsDigest(in.Models) {
		t.Fatalf("catalog digest %s, want the catalog's", mt.CatalogDigest)
	}
	return tier
}

// TestPropertySkillsNarrow: the skills a spec holds are available ones,
// admitted by the pack entry (the variant's patterns when one set them),
// and, when the task names patterns, only ones its patterns match. Few
// drawn tasks narrow a selection, so every selection is also narrowed to
// its first skill by name and resolved again.
func TestPropertySkillsNarrow(t *testing.T) {
	var selected, narrowed int
	rapid.Check(t, func(t *rapid.T) {
		sc, got := drawResolved(t)
		checkSkills(t, sc, got)
		if len(got.Skills) == 0 {
			return
		}
		selected++
		one := scenario{sc.ref, deepCopy(sc.in)}
		one.in.Task.Skills = []string{got.Skills[0].Name}
		n, err := resolve.Resolve(one.ref, one.in)
		if err != nil {
			t.Fatalf("narrowing %v to %q: %v", skillNames(got.Skills), got.Skills[0].Name, err)
		}
		checkSkills(t, one, n)
		if len(n.Skills) != 1 || n.Skills[0] != got.Skills[0] {
			t.Fatalf("narrowing %v to %q selected %v", skillNames(got.Skills), got.Skills[0].Name, skillNames(n.Skills))
		}
		narrowed++
	})
	if selected == 0 || narrowed == 0 {
		t.Errorf("%d results with skills, %d narrowed by the task: the generator no longer reaches skill selection", selected, narrowed)
	}
}

func checkSkills(t *rapid.T, sc scenario, got resolve.ResolvedAgentSpec) {
	matches := func(patterns []string, name string) bool {
		return slices.ContainsFunc(patterns, func(p string) bool { m, _ := path.Match(p, name); return m })
	}
	var entry []string
	if _, casts := sc.ref.(resolve.RoleName); casts {
		e := sc.in.Pack.Roles[string(sc.ref.(resolve.RoleName))]
		entry = e.Skills
		for _, i := range got.Pack.Variants {
			if s := e.Variants[i].Set.Skills; s != nil {
				entry = s
			}
		}
	}
	for _, s := range got.Skills {
		if !slices.Contains(sc.in.Skills, s) {
			t.Fatalf("skill %+v is not an available one", s)
		}
		if !matches(entry, s.Name) {
			t.Fatalf("skill %q is not admitted by the entry's %q", s.Name, entry)
		}
		if sc.in.Task.Skills != nil && !matches(sc.in.Task.Skills, s.Name) {
			t.Fatalf("skill %q is outside the task's %q", s.Name, sc.in.Task.Skills)
		}
	}
}

// TestPropertyExplainAgrees: with explain on, every field's chain has
// exactly one selected candidate for a decided field (or selected blocks
// for the prompt), the chain's value and source are the spec's own, and
// the rest of the result is what Resolve gives without explaining.
func TestPropertyExplainAgrees(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sc := genScenario.Draw(t, "scenario")
		sc.in.Explain = true
		got, err := resolve.Resolve(sc.ref, sc.in)
		plain := sc.in
		plain.Explain = false
		want, werr := resolve.Resolve(sc.ref, plain)
		if diff := cmp.Diff(werr, err); diff != "" {
			t.Fatalf("explaining changed the error:\n%s", diff)
		}
		if err != nil {
			return
		}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(resolve.ResolvedAgentSpec{}, "Explain")); diff != "" {
			t.Fatalf("explaining changed the result:\n%s", diff)
		}
		sources := map[string]string{}
		for _, kv := range got.Sources.Fields() {
			sources[kv[0]] = kv[1]
		}
		specValue := map[string]any{
			"identity": got.Sources.Identity, "pack": got.Pack.Name, "model": got.Model, "effort": valueOf(got.Effort),
			"modes": got.Identity.Modes, "tools": got.Tools, "permissions": anyOrNil(got.Permissions),
			"yolo": got.Yolo, "bypass": got.Bypass, "fast_mode": got.FastMode, "lion_system": got.LionSystem,
			"prompt": got.PromptBody, "artifact_defaults": mapOrNil(got.ArtifactDefaults), "timeout": valueOf(got.Timeout),
			"active": got.Active, "skills": skillNames(got.Skills),
		}
		seen := map[string]bool{}
		for _, f := range got.Explain {
			seen[f.Field] = true
			if f.Source != sources[f.Field] {
				t.Fatalf("%s: chain source %q, spec source %q", f.Field, f.Source, sources[f.Field])
			}
			if !equalJSON(t, f.Value, specValue[f.Field]) {
				t.Fatalf("%s: chain value %#v, spec value %#v", f.Field, f.Value, specValue[f.Field])
			}
			var selected []resolve.Candidate
			for _, c := range f.Candidates {
				if c.Status == resolve.StatusSelected {
					selected = append(selected, c)
				}
			}
			if f.Field == "prompt" {
				continue // every non-blank block is selected
			}
			if len(selected) != 1 {
				t.Fatalf("%s: %d selected candidates, want 1: %+v", f.Field, len(selected), f.Candidates)
			}
			if f.Field == "identity" {
				continue // the candidate is the name, the value its token
			}
			if f.Field == "model" || f.Field == "skills" {
				// the selected candidate offers the symbol or the patterns
				if selected[0].Source != f.Source {
					t.Fatalf("%s: selected %q, spec source %q", f.Field, selected[0].Source, f.Source)
				}
				continue
			}
			if selected[0].Source != f.Source || !equalJSON(t, selected[0].Value, specValue[f.Field]) {
				t.Fatalf("%s: selected %s=%#v, spec %s=%#v", f.Field, selected[0].Source, selected[0].Value, f.Source, specValue[f.Field])
			}
		}
		for field := range sources {
			if !seen[field] {
				t.Fatalf("no chain for %s", field)
			}
		}
	})
}

func valueOf[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func anyOrNil(p *resolve.PermissionPolicy) any {
	if p == nil {
		return nil
	}
	return p
}

func mapOrNil(m map[string]any) any {
	if m == nil {
		return nil
	}
	return m
}

func skillNames(s []resolve.Skill) []string {
	out := []string{}
	for _, k := range s {
		out = append(out, k.Name)
	}
	return out
}

func equalJSON(t *rapid.T, a, b any) bool {
	// Nil and empty lists stay apart, as outcome data encodes them.
	ja, err := json.Marshal(a, json.Deterministic(true), json.FormatNilSliceAsNull(true), json.FormatNilMapAsNull(true))
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b, json.Deterministic(true), json.FormatNilSliceAsNull(true), json.FormatNilMapAsNull(true))
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}
