package discover

import "github.com/rolecall/rolecall/resolve"

var profileKeys = []string{
	"name", "description", "disposition", "base_role", "model", "effort",
	"yolo", "bypass", "fast_mode", "lion_system", "artifact_defaults",
	"timeout", "resume_on_timeout", "enabled",
}

// decodeProfile decodes an external profile: strict frontmatter, then the
// body. stem is the profile's name from its file (or directory) name.
func decodeProfile(path, stem string, data []byte) (*Profile, *Error) {
	code := resolve.CodeProfileInvalid
	if err := resolve.ValidateName("profile", stem); err != nil {
		return nil, &Error{Code: code, File: path, Line: 1, Subject: stem, Message: "the file name is not a valid profile name: " + nameMsg(err)}
	}
	d, root, fm, err := markdownDoc(path, code, data)
	if err != nil {
		return nil, err
	}
	p := &Profile{
		ExternalProfile: resolve.ExternalProfile{Name: stem, Body: fm.body},
		Origin:          Origin{File: path},
		KeyLines:        map[string]int{"body": fm.bodyLine},
	}
	if root == nil {
		p.ExternalProfile = p.ExternalProfile.Seal()
		return p, nil
	}
	ep := &p.ExternalProfile
	err = d.fields(root, "", profileKeys, &p.Extensions, p.KeyLines, func(f pair, key string) *Error {
		var err *Error
		switch f.key {
		case "name":
			err = d.stemName(f, key, stem)
		case "description":
			ep.Description, err = d.str(f.v, key)
		case "disposition":
			var s string
			if s, err = d.str(f.v, key); err == nil {
				switch dp := resolve.Disposition(s); dp {
				case resolve.DispositionOverlay, resolve.DispositionReplacement:
					ep.Disposition = dp
				default:
					err = d.errAt(f.v, key, "must be overlay or replacement, got %q", s)
				}
			}
		case "base_role":
			ep.BaseRole, err = opt(d.name(f.v, key))
		case "model":
			ep.Model, err = opt(d.ident(f.v, key))
		case "effort":
			ep.Effort, err = opt(d.ident(f.v, key))
		case "yolo":
			ep.Yolo, err = opt(d.boolean(f.v, key))
		case "bypass":
			ep.Bypass, err = opt(d.boolean(f.v, key))
		case "fast_mode":
			ep.FastMode, err = opt(d.boolean(f.v, key))
		case "lion_system":
			ep.LionSystem, err = opt(d.boolean(f.v, key))
		case "artifact_defaults":
			ep.ArtifactDefaults, err = d.mapping(f.v, key)
		case "timeout":
			ep.Timeout, err = opt(d.positive(f.v, key))
		case "resume_on_timeout":
			ep.ResumeOnTimeout, err = d.boolean(f.v, key)
		case "enabled":
			ep.Enabled, err = opt(d.boolean(f.v, key))
		}
		return err
	})
	if err != nil {
		err.Subject = stem
		return nil, err
	}
	p.ExternalProfile = p.ExternalProfile.Seal()
	return p, nil
}

// profileLine is the line of key in p, or 1 (the frontmatter's start).
func profileLine(p *Profile, key string) int {
	if l, ok := p.KeyLines[key]; ok {
		return l
	}
	return 1
}
