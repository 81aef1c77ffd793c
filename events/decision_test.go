package events_test

import (
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/resolve"
)

// TestDecisionEncoding: the record encodes as the library encodes the
// struct, with a nil task as null and an environment placeholder's digest
// as null.
func TestDecisionEncoding(t *testing.T) {
	digest := "sha256:00"
	d := events.Decision{ID: "rc-1", Config: events.DecisionConfig{Source: "files"}, Inputs: []events.DecisionInput{
		{Kind: resolve.InputPack, Name: "team", Origin: "packs/team.yaml", Digest: &digest},
		{Kind: resolve.InputPlaceholderEnv, Name: "RC_<&>", Origin: "rolecall.yaml"},
	}}
	b, err := events.MarshalData(&d)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"id":"rc-1","worker_version":"","config":{"source":"files","digest":"","revision":null},"task":null,"inputs":[` +
		`{"kind":"pack","name":"team","origin":"packs/team.yaml","digest":"sha256:00"},` +
		`{"kind":"placeholder_env","name":"RC_<&>","origin":"rolecall.yaml","digest":null}],"prompt_digest":null}`
	if string(b) != want {
		t.Errorf("record %s\nwant   %s", b, want)
	}
	var back events.Decision
	if err := json.Unmarshal(b, &back); err != nil || len(back.Inputs) != 2 || back.Inputs[1].Digest != nil {
		t.Errorf("decode: %v %+v", err, back)
	}
}
