package bigroot

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Size says how many of each kind of file to write.
type Size struct {
	Roles    int // catalog/roles/*.md (the 14 built-in modes come with them)
	Packs    int // packs/*.yaml, each with an entry for PackRoles roles
	Profiles int // agents/*.md, half overlays and half replacements
}

// Full is the size the scale targets are stated for.
var Full = Size{Roles: 2000, Packs: 500, Profiles: 10000}

// PackRoles is how many roles each pack configures.
const PackRoles = 8

// Modes are the catalog's modes; fast conflicts with slow and systematic as
// in the built-in catalog.
var Modes = []string{"adversarial", "associative", "constraint-solving", "empathetic", "evidential", "fast", "framing", "metacognitive", "premortem", "probabilistic", "slow", "socratic", "systematic", "visual-spatial"}

// RoleName, PackName and ProfileName name the i-th file of each kind.
func RoleName(i int) string    { return fmt.Sprintf("role-%04d", i) }
func PackName(i int) string    { return fmt.Sprintf("pack-%03d", i) }
func ProfileName(i int) string { return fmt.Sprintf("profile-%05d", i) }

// Write writes a root of the given size into dir (which should be empty).
func Write(dir string, sz Size) error {
	w := func(rel, content string) error {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, []byte(content), 0o644)
	}
	for _, m := range Modes {
		conflicts := ""
		if m == "fast" {
			conflicts = "conflicts_with: [slow, systematic]\n"
		}
		if err := w("catalog/modes/"+m+".md", fmt.Sprintf("---\nname: %s\ndescription: The %s mode.\n%s---\nThink in the %s way.\n", m, m, conflicts, m)); err != nil {
			return err
		}
	}
	for i := range sz.Roles {
		if err := w("catalog/roles/"+RoleName(i)+".md", Role(i, 0)); err != nil {
			return err
		}
	}
	for i := range sz.Packs {
		if err := w("packs/"+PackName(i)+".yaml", Pack(i, sz.Roles, 0)); err != nil {
			return err
		}
	}
	for i := range sz.Profiles {
		if err := w("agents/"+ProfileName(i)+".md", Profile(i, sz.Roles, 0)); err != nil {
			return err
		}
	}
	return w("rolecall.yaml", "default_pack: "+PackName(0)+"\ndefaults:\n  model: runtime-default\n  tools: [read]\n")
}

// Role is the content of role i; gen varies it (an edit).
func Role(i, gen int) string {
	return fmt.Sprintf("---\nname: %s\ndescription: Role number %d, generation %d.\nemits: [report]\n---\n# Role %d\n\n%s", RoleName(i), i, gen, i, strings.Repeat("Do the work of this role carefully and say what you did.\n", 8))
}

// Pack is the content of pack i over a catalog of roles roles.
func Pack(i, roles, gen int) string {
	var b strings.Builder
	b.WriteString("roles:\n")
	for k := range PackRoles {
		fmt.Fprintf(&b, "  %s:\n    model: model-%d-%d\n    effort: medium\n    default_modes: [evidential]\n    authority:\n      - Act within the task\n    boundaries:\n      - Stay in scope\n", RoleName((i*PackRoles+k)%roles), i, gen)
	}
	return b.String()
}

// Profile is the content of profile i over a catalog of roles roles.
func Profile(i, roles, gen int) string {
	if i%2 == 0 {
		return fmt.Sprintf("---\ndisposition: overlay\nbase_role: %s\nmodel: m-%d\ntimeout: 60\n---\nOverlay body %d, generation %d.\n", RoleName(i%roles), gen, i, gen)
	}
	return fmt.Sprintf("---\ndisposition: replacement\ndescription: Replacement %d\nartifact_defaults:\n  format: markdown\n---\nReplacement body %d, generation %d.\n", i, i, gen)
}
