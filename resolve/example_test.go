package resolve_test

import (
	"errors"
	"fmt"

	"github.com/rolecall/rolecall/resolve"
)

func exampleInputs() resolve.Inputs {
	model := "claude-opus-4-1"
	return resolve.Inputs{
		Catalog: &resolve.Catalog{
			Roles: map[string]resolve.Role{
				"architect": {Name: "architect", Body: "You are the architect.", Emits: []string{"adr"}},
			},
			Modes: map[string]resolve.Mode{
				"systematic": {Name: "systematic", Behaviors: "Work step by step."},
				"fast":       {Name: "fast", Behaviors: "Answer quickly.", ConflictsWith: []string{"systematic"}},
			},
		},
		Pack: &resolve.Pack{Name: "default", Roles: map[string]resolve.PackEntry{
			"architect": {
				Model:        &model,
				DefaultModes: []string{"systematic"},
				Boundaries:   []string{"Do not write production code."},
			},
		}},
		PackSelection: resolve.PackFromWorkerDefault,
		Defaults:      resolve.RuntimeDefaults{Tools: []string{"read"}, LionSystem: true},
	}
}

// A bare role name resolves against the built-in catalog and the selected
// pack; every effective value says where it came from.
func ExampleResolve() {
	spec, err := resolve.Resolve(resolve.RoleName("architect"), exampleInputs())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("model:", spec.Model, "from", spec.Sources.Model)
	fmt.Println("modes:", spec.Identity.Modes, "from", spec.Sources.Modes)
	fmt.Println("effort set:", spec.Effort != nil, "from", spec.Sources.Effort)
	fmt.Println("tools:", spec.Tools, "from", spec.Sources.Tools)
	fmt.Println("prompt from", spec.Sources.Prompt+":")
	fmt.Println(spec.PromptBody)
	// Output:
	// model: claude-opus-4-1 from pack
	// modes: [systematic] from pack
	// effort set: false from provider_default
	// tools: [read] from runtime_default
	// prompt from casts:
	// You are the architect.
	//
	// Work step by step.
	//
	// ## Boundaries
	// - Do not write production code.
}

// Failures are typed: match them with errors.As and branch on the code.
func ExampleResolutionError() {
	in := exampleInputs()
	in.Task.Modes = []string{"systematic", "fast"}
	_, err := resolve.Resolve(resolve.RoleName("architect"), in)

	var re *resolve.ResolutionError
	if errors.As(err, &re) {
		fmt.Println("code:", re.Code)
		fmt.Println("subject:", re.Subject)
		fmt.Println("details:", re.Details["modes"])
		fmt.Println("is mode_conflict:", errors.Is(err, &resolve.ResolutionError{Code: resolve.CodeModeConflict}))
	}
	// Output:
	// code: mode_conflict
	// subject: fast
	// details: [systematic fast]
	// is mode_conflict: true
}

// The surface token "external:<name>" is the only way to select a
// replacement profile; a bare name always means a built-in Role.
func ExampleParseRoleToken() {
	for _, token := range []string{"architect", "external:ghostwriter", "../etc/passwd"} {
		ref, err := resolve.ParseRoleToken(token)
		if err != nil {
			var re *resolve.ResolutionError
			errors.As(err, &re)
			fmt.Printf("%-22s → %s (%s stage)\n", token, re.Code, re.Code.Stage())
			continue
		}
		fmt.Printf("%-22s → %T %q\n", token, ref, ref.Token())
	}
	// Output:
	// architect              → resolve.RoleName "architect"
	// external:ghostwriter   → resolve.ExternalRef "external:ghostwriter"
	// ../etc/passwd          → task_invalid (decode stage)
}
