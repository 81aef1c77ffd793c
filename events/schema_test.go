package events_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/schematest"
	"github.com/rolecall/rolecall/resolve"
)

// resolveCodes reads every constant of type Code declared in package
// resolve's source, so a code added there fails this test until
// failed.v1.json lists it.
func resolveCodes(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir("../resolve")
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, entry := range entries {
		name := entry.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join("../resolve", name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		{
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, s := range g.Specs {
					vs := s.(*ast.ValueSpec)
					if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
						continue
					}
					for _, v := range vs.Values {
						lit, ok := v.(*ast.BasicLit)
						if !ok {
							t.Fatalf("Code constant with a non-literal value at %v", fset.Position(v.Pos()))
						}
						c, _ := strconv.Unquote(lit.Value)
						codes = append(codes, c)
					}
				}
			}
		}
	}
	slices.Sort(codes)
	return codes
}

type failedSchema struct {
	Properties struct {
		Code struct {
			Enum []string `json:"enum"`
		} `json:"code"`
		Stage struct {
			Enum []string `json:"enum"`
		} `json:"stage"`
	} `json:"properties"`
}

func TestFailedSchemaListsEveryCode(t *testing.T) {
	var s failedSchema
	if err := json.Unmarshal(events.Schema(events.SchemaFailed), &s); err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(slices.Values(s.Properties.Code.Enum))
	want := resolveCodes(t)
	if len(want) < 30 {
		t.Fatalf("found only %d codes in resolve: %v", len(want), want)
	}
	if !slices.Equal(got, want) {
		t.Errorf("failed.v1.json codes\n got %v\nwant %v", got, want)
	}
	for _, c := range resolve.ResolverCodes() {
		if !slices.Contains(got, string(c)) {
			t.Errorf("resolver code %s missing", c)
		}
	}
	wantStages := []string{"decode", "discover", "resolve", "materialize", "deliver"}
	if !slices.Equal(s.Properties.Stage.Enum, wantStages) {
		t.Errorf("stages = %v, want %v", s.Properties.Stage.Enum, wantStages)
	}
}

// Each code is valid only with its own stage (resolve.Code.Stage).
func TestFailedSchemaStagePerCode(t *testing.T) {
	stages := []resolve.Stage{resolve.StageDecode, resolve.StageDiscover, resolve.StageResolve, resolve.StageMaterialize, resolve.StageDeliver}
	for _, c := range resolveCodes(t) {
		code := resolve.Code(c)
		for _, st := range stages {
			_, h, body, err := events.EncodeFailed("", events.OutcomeMeta{ID: "rc-1"},
				&events.FailureData{TaskID: ptr("T"), Stage: st, Code: code, Message: "m"})
			if err != nil {
				t.Fatal(err)
			}
			e, err := events.DecodeOutcome(h, body)
			if err != nil {
				t.Fatal(err)
			}
			err = schematest.Validate(events.SchemaFailed, e.Data())
			if ok := st == code.Stage(); ok != (err == nil) {
				t.Errorf("code %s with stage %s: schema error %v, want valid=%v", code, st, err, ok)
			}
		}
	}
}

func TestTaskSchemaAgreesWithDecoder(t *testing.T) {
	valid := []string{fullTask, minimalTask,
		`{"task_id":"T","role":"external:house-bot","modes":[],"overrides":{"tools":[],"extra_prompt":"","yolo":false}}`,
		`{"task_id":"T","role":"a","pack":null,"profile":null,"modes":null,"overrides":null}`,
		`{"task_id":"T","role":"a","overrides":{"permissions":{"mode":"rules","allow":{"Bash":null,"mcp(x)":["*"]},"deny":null}}}`,
		`{"task_id":"T","role":"a","skills":["go-*","review","[a-c]?"],"overrides":{"model":"tier:cheap"}}`,
		`{"task_id":"T","role":"a","skills":[]}`,
		`{"task_id":"T","role":"a","skills":null}`,
	}
	for _, data := range valid {
		if _, _, err := events.DecodeTaskData([]byte(data), events.DecodeOptions{}); err != nil {
			t.Errorf("decoder rejects %s: %v", data, err)
		}
		if err := schematest.Validate(events.SchemaTask, []byte(data)); err != nil {
			t.Errorf("schema rejects %s: %v", data, err)
		}
	}
	// Rules only the decoder enforces (documented in the schema).
	decoderOnly := []string{events.ReasonDuplicateKey, events.ReasonInvalidUTF8, events.ReasonInvalidGlob}
	for _, tc := range taskInvalidCases {
		if slices.Contains(decoderOnly, tc.reason) {
			continue
		}
		if err := schematest.Validate(events.SchemaTask, []byte(tc.data)); err == nil {
			t.Errorf("%s: schema accepts %s", tc.name, tc.data)
		}
	}
}

func TestResolvedSchemaRejects(t *testing.T) {
	d := resolvedFor(t, minimalTask, nil)
	good, err := json.Marshal(d, json.FormatNilSliceAsNull(true), json.FormatNilMapAsNull(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := schematest.Validate(events.SchemaResolved, good); err != nil {
		t.Fatalf("valid data rejected: %v", err)
	}
	mutations := map[string]func(m map[string]any){
		"missing sources.model": func(m map[string]any) { delete(m["sources"].(map[string]any), "model") },
		"unknown member":        func(m map[string]any) { m["extra"] = 1 },
		"empty model":           func(m map[string]any) { m["model"] = "" },
		"bad digest":            func(m map[string]any) { m["inputs_digest"] = "md5:x" },
		"tools null":            func(m map[string]any) { m["tools"] = nil },
		"bad source value":      func(m map[string]any) { m["sources"].(map[string]any)["modes"] = "default" },
		"timeout zero":          func(m map[string]any) { m["timeout"] = 0 },
	}
	for name, mutate := range mutations {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		mutate(m)
		b, _ := json.Marshal(m)
		if err := schematest.Validate(events.SchemaResolved, b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A spec with a tier symbol expanded and skills selected matches the
// resolved schema, and the schema holds those members to their shapes.
func TestResolvedSchemaTierAndSkills(t *testing.T) {
	task, ref, err := events.DecodeTaskData([]byte(`{"task_id":"T-1","role":"architect","skills":["go-*"],"overrides":{"model":"tier:strong"}}`), events.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pack := *testPack()
	pack.Roles = map[string]resolve.PackEntry{"architect": {Model: ptr("m"), Skills: []string{"go-*", "review"}}}
	pack.Digest = ""
	models := resolve.ModelCatalog{Tiers: map[string]*string{"strong": nil, "cheap": ptr("model-cheap")}, Fallback: []string{"strong", "cheap"}, AllowFallback: true}.Seal()
	digest := "sha256:" + strings.Repeat("ab", 32)
	in := resolve.Inputs{
		Catalog: testCatalog(), Pack: &pack, PackSelection: resolve.PackFromWorkerDefault, Task: task.Overrides(), Models: &models,
		Skills: []resolve.Skill{{Name: "go-lint", Source: "root", Digest: digest}, {Name: "go-test", Source: "team", Digest: digest}, {Name: "review", Source: "root", Digest: digest}},
	}
	spec, err := resolve.Resolve(ref, in)
	if err != nil {
		t.Fatal(err)
	}
	d := &events.ResolvedData{TaskID: task.TaskID, ResolvedAgentSpec: spec, SystemMessage: spec.PromptBody, InputsDigest: resolve.InputsDigest(ref, in)}
	good, err := events.MarshalData(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := schematest.Validate(events.SchemaResolved, good); err != nil {
		t.Fatalf("valid data rejected: %v\n%s", err, good)
	}
	if spec.Model != "model-cheap" || spec.ModelTier == nil || spec.ModelTier.ResolvedVia != "fallback:cheap" || len(spec.Skills) != 2 {
		t.Fatalf("unexpected spec: model %s tier %+v skills %v", spec.Model, spec.ModelTier, spec.Skills)
	}
	mutations := map[string]func(m map[string]any){
		"model_tier missing":          func(m map[string]any) { delete(m, "model_tier") },
		"model_tier without digest":   func(m map[string]any) { delete(m["model_tier"].(map[string]any), "catalog_digest") },
		"model_tier via unknown":      func(m map[string]any) { m["model_tier"].(map[string]any)["resolved_via"] = "hardcoded" },
		"model_tier symbol a literal": func(m map[string]any) { m["model_tier"].(map[string]any)["symbol"] = "opus" },
		"skills missing":              func(m map[string]any) { delete(m, "skills") },
		"skills null":                 func(m map[string]any) { m["skills"] = nil },
		"skill without digest":        func(m map[string]any) { delete(m["skills"].([]any)[0].(map[string]any), "digest") },
		"skill with a bad name":       func(m map[string]any) { m["skills"].([]any)[0].(map[string]any)["name"] = "Go Lint" },
		"sources.skills missing":      func(m map[string]any) { delete(m["sources"].(map[string]any), "skills") },
		"sources.skills bad":          func(m map[string]any) { m["sources"].(map[string]any)["skills"] = "default" },
		"pack.variants missing":       func(m map[string]any) { delete(m["pack"].(map[string]any), "variants") },
		"pack.variants negative":      func(m map[string]any) { m["pack"].(map[string]any)["variants"] = []any{-1} },
	}
	for name, mutate := range mutations {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		mutate(m)
		b, _ := json.Marshal(m)
		if err := schematest.Validate(events.SchemaResolved, b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// pack_variant is a source of effort, modes and skills.
	for _, field := range []string{"effort", "modes", "skills"} {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		m["sources"].(map[string]any)[field] = "pack_variant"
		b, _ := json.Marshal(m)
		if err := schematest.Validate(events.SchemaResolved, b); err != nil {
			t.Errorf("sources.%s pack_variant rejected: %v", field, err)
		}
	}
}

func TestSchemaFiles(t *testing.T) {
	for _, name := range events.SchemaNames() {
		var s struct {
			Schema string `json:"$schema"`
			ID     string `json:"$id"`
		}
		if err := json.Unmarshal(events.Schema(name), &s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s.Schema != "https://json-schema.org/draft/2020-12/schema" || s.ID != events.DefaultDataSchemaBase+name {
			t.Errorf("%s: $schema %q $id %q", name, s.Schema, s.ID)
		}
	}
	if events.Schema("nope.json") != nil {
		t.Error("Schema of an unknown name is not nil")
	}
	if err := schematest.Validate("nope.json", []byte(`{}`)); err == nil {
		t.Error("Validate with an unknown schema succeeded")
	}
	if err := schematest.Validate(events.SchemaTask, []byte(`{`)); err == nil {
		t.Error("Validate of non-JSON succeeded")
	}
	// Schema returns a copy.
	b := events.Schema(events.SchemaTask)
	b[0] = 'x'
	if events.Schema(events.SchemaTask)[0] == 'x' {
		t.Error("Schema shares its bytes")
	}
}
