package discover_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/resolve"
)

// seeds adds every file under testdata/roots (and the embedded content)
// whose path matches keep.
func seeds(f *testing.F, keep func(path string) bool) {
	f.Helper()
	for _, dir := range []string{filepath.Join("testdata", "roots"), "builtin"} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !keep(filepath.ToSlash(p)) {
				return err
			}
			data, err := os.ReadFile(p)
			if err == nil {
				f.Add(data)
			}
			return err
		})
		if err != nil {
			f.Fatal(err)
		}
	}
}

// checkErr asserts a decoder error is a *discover.Error with one of codes
// and a file name.
func checkErr(t *testing.T, err error, codes ...resolve.Code) {
	t.Helper()
	var de *discover.Error
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T) is not a *discover.Error", err, err)
	}
	for _, c := range codes {
		if de.Code == c {
			if de.File == "" || de.Message == "" {
				t.Fatalf("error without file or message: %#v", de)
			}
			return
		}
	}
	t.Fatalf("unexpected code %s in %v", de.Code, de)
}

func FuzzFrontmatter(f *testing.F) {
	seeds(f, func(p string) bool { return strings.HasSuffix(p, ".md") })
	f.Add([]byte("---\r\ndisposition: replacement\r\n---\r\nbody"))
	f.Add([]byte("\xEF\xBB\xBF---\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := discover.DecodeProfile("agents/bot.md", "bot", data)
		if err != nil {
			checkErr(t, err, resolve.CodeProfileInvalid)
			return
		}
		if p.Name != "bot" || (p.Timeout != nil && *p.Timeout <= 0) || strings.Contains(p.Body, "\r\n") {
			t.Fatalf("accepted an invalid profile: %+v", p.ExternalProfile)
		}
		switch p.Disposition {
		case resolve.DispositionLegacy, resolve.DispositionOverlay, resolve.DispositionReplacement:
		default:
			t.Fatalf("accepted disposition %q", p.Disposition)
		}
	})
}

func FuzzPackYAML(f *testing.F) {
	seeds(f, func(p string) bool { return strings.HasSuffix(p, ".yaml") && strings.Contains(p, "packs/") })
	f.Fuzz(func(t *testing.T, data []byte) {
		pf, err := discover.DecodePack("packs/team.yaml", "team", data)
		if err != nil {
			checkErr(t, err, resolve.CodePackInvalid)
			return
		}
		if pf.Pack.Name != "team" || pf.Pack.Roles == nil {
			t.Fatalf("accepted pack %+v", pf.Pack)
		}
		// Resolution trusts the sealed digest: it must be the content's.
		if d := resolve.PackDigest(&resolve.Pack{Name: pf.Pack.Name, Roles: pf.Pack.Roles}); pf.Pack.Digest != d {
			t.Fatalf("pack sealed with digest %q, its content's is %s", pf.Pack.Digest, d)
		}
		for role := range pf.Pack.Roles {
			if resolve.ValidateName("role", role) != nil {
				t.Fatalf("accepted role name %q", role)
			}
		}
	})
}

func FuzzConfigYAML(f *testing.F) {
	seeds(f, func(p string) bool { return strings.HasSuffix(p, "rolecall.yaml") })
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := discover.DecodeConfig("rolecall.yaml", data)
		if err != nil {
			checkErr(t, err, resolve.CodeConfigInvalid, resolve.CodePathEscape)
			return
		}
		if cfg.LegacyProfiles != discover.LegacyAllow && cfg.LegacyProfiles != discover.LegacyReject {
			t.Fatalf("accepted legacy_profiles %q", cfg.LegacyProfiles)
		}
		for _, r := range append(cfg.ProfileRoots, cfg.PreambleFile) {
			if r != "" && !filepath.IsLocal(r) {
				t.Fatalf("accepted a path outside the root: %q", r)
			}
		}
	})
}
