package resolve

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// DigestPrefix starts every digest string.
const DigestPrefix = "sha256:"

// canonical is the encoding every digest hashes: JSON with sorted map keys
// (json.Deterministic), and nil lists and maps written as null, so absent
// and empty stay apart exactly as they do in the Go values. Invalid UTF-8,
// which no decoder of rolecall lets through, is written as U+FFFD rather
// than failing, so a digest is defined for every value.
var canonical = json.JoinOptions(
	json.Deterministic(true),
	json.FormatNilSliceAsNull(true),
	json.FormatNilMapAsNull(true),
	jsontext.AllowInvalidUTF8(true),
)

// digest is "sha256:" and the hex SHA-256 of v's canonical encoding. A
// value JSON cannot hold (a NaN inside an artifact mapping; discovery
// refuses those) is hashed by its error, which keeps the digest total.
func digest(v any) string {
	// Encoded straight into the hash: the encoding is never kept.
	h := sha256.New()
	if err := json.MarshalWrite(h, v, canonical); err != nil {
		h.Reset()
		h.Write([]byte("unencodable: " + err.Error()))
	}
	return DigestPrefix + hex.EncodeToString(h.Sum(nil))
}

// Version tags of the canonical documents: a change of what a digest
// covers changes its tag, so old and new digests never collide.
const (
	catalogTag = "rolecall.catalog.v2"
	packTag    = "rolecall.pack.v2"
	inputsTag  = "rolecall.inputs.v3"
	modelsTag  = "rolecall.models.v1"
	profileTag = "rolecall.profile.v1"
)

// ProfileDigest is the canonical digest of an external profile: p.Digest
// when it was sealed.
func ProfileDigest(p *ExternalProfile) string {
	if p == nil {
		return ""
	}
	if p.Digest != "" {
		return p.Digest
	}
	return digest(struct {
		V       string           `json:"v"`
		Profile *ExternalProfile `json:"profile"`
	}{profileTag, p})
}

// Seal returns a copy of p with Digest set, so a task's inputs digest
// takes the profile's digest instead of encoding its body again; see
// Catalog.Seal.
func (p ExternalProfile) Seal() ExternalProfile {
	p.Digest = ""
	p.Digest = ProfileDigest(&p)
	return p
}

// ModelsDigest is the canonical digest of a model catalog: m.Digest when
// it was sealed.
func ModelsDigest(m *ModelCatalog) string {
	if m == nil {
		return ""
	}
	if m.Digest != "" {
		return m.Digest
	}
	return digest(struct {
		V      string        `json:"v"`
		Models *ModelCatalog `json:"models"`
	}{modelsTag, m})
}

// Seal returns a copy of m with Digest set; see Catalog.Seal.
func (m ModelCatalog) Seal() ModelCatalog {
	m.Digest = ""
	m.Digest = ModelsDigest(&m)
	return m
}

// CatalogDigest is the canonical digest of a catalog.
func CatalogDigest(c *Catalog) string {
	if c == nil {
		return ""
	}
	return digest(struct {
		V       string   `json:"v"`
		Catalog *Catalog `json:"catalog"`
	}{catalogTag, c})
}

// PackDigest is the canonical digest of a pack: p.Digest when it was
// sealed.
func PackDigest(p *Pack) string {
	if p == nil {
		return ""
	}
	if p.Digest != "" {
		return p.Digest
	}
	return digest(struct {
		V    string `json:"v"`
		Pack *Pack  `json:"pack"`
	}{packTag, p})
}

// Seal returns a copy of c with Digest set. Discovery seals each catalog
// once per snapshot, so a task's inputs digest takes the catalog's digest
// instead of encoding some 25 KB again. A sealed catalog must not be
// modified afterwards.
func (c Catalog) Seal() Catalog {
	c.Digest = ""
	c.Digest = CatalogDigest(&c)
	return c
}

// Seal returns a copy of p with Digest set; see Catalog.Seal.
func (p Pack) Seal() Pack {
	p.Digest = ""
	p.Digest = PackDigest(&p)
	return p
}

func catalogDigest(c *Catalog) string {
	if c != nil && c.Digest != "" {
		return c.Digest
	}
	return CatalogDigest(c)
}

// InputsDigest is the digest of ref and in: equal inputs give equal
// digests, and a change of any field changes it. The catalog, the pack,
// the profile and the model catalog enter through their own digests,
// each skill through its content digest.
func InputsDigest(ref RoleRef, in Inputs) string {
	var token *string
	if ref != nil {
		t := ref.Token()
		token = &t
	}
	return digest(struct {
		V             string          `json:"v"`
		Ref           *string         `json:"ref"`
		Catalog       string          `json:"catalog"`
		Pack          string          `json:"pack"`
		PackSelection PackSelection   `json:"pack_selection"`
		Profile       string          `json:"profile"`
		Task          TaskOverrides   `json:"task"`
		Defaults      RuntimeDefaults `json:"defaults"`
		Policy        Policy          `json:"policy"`
		Models        string          `json:"models"`
		Skills        []Skill         `json:"skills"`
	}{inputsTag, token, catalogDigest(in.Catalog), PackDigest(in.Pack), in.PackSelection, ProfileDigest(in.Profile), in.Task, in.Defaults, in.Policy,
		ModelsDigest(in.Models), in.Skills})
}
