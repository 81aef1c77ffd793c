package events_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/resolve"
)

// The hot path per task is one DecodeTask and one EncodeResolved (or
// EncodeFailed). Targets: decoding a task ≤ 12 µs, encoding a 7 KB
// resolved outcome ≤ 20 µs (go test -bench . -benchmem).

// BenchmarkDecodeTask decodes fullTask (every member of the task schema)
// with a W3C trace context, as the bench workload's largest task comes.
func BenchmarkDecodeTask(b *testing.B) {
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			h, body, err := events.EncodeTask(testSource, testID, []byte(fullTask), testTP, testTS, m.binary)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := events.DecodeTask(h, body, events.DecodeOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecodeTaskData(b *testing.B) {
	data := []byte(fullTask)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := events.DecodeTaskData(data, events.DecodeOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeTaskManyExtensions is the event of the quadratic
// extension check: 125,000 extension attributes in 1 MB, which took 26 s
// of CPU when every name was looked up in a list of those before it. It
// must decode in well under 50 ms.
func BenchmarkDecodeTaskManyExtensions(b *testing.B) {
	body := manyExtensions(125_000)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := events.DecodeTask(structuredHeader(), body, events.DecodeOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeResolved encodes an outcome of the bench workload's size
// (largeResolved, about 7 KB).
func BenchmarkEncodeResolved(b *testing.B) {
	d := largeResolved(b, "Fix ticket T-1.")
	meta := testMeta("T-42")
	var n int
	b.ReportAllocs()
	for b.Loop() {
		_, _, body, err := events.EncodeResolved("", meta, d)
		if err != nil {
			b.Fatal(err)
		}
		n = len(body)
	}
	b.SetBytes(int64(n))
}

// BenchmarkEncodeResolvedDecision is BenchmarkEncodeResolved with a
// decision record of 50 inputs, more than one decision lists.
func BenchmarkEncodeResolvedDecision(b *testing.B) {
	d := *largeResolved(b, "Fix ticket T-1.")
	dec := &events.Decision{Config: events.DecisionConfig{Source: "files", Digest: "sha256:" + strings.Repeat("a", 64)},
		Task: jsontext.Value(fullTask)}
	for i := range 50 {
		digest := "sha256:" + strings.Repeat("b", 64)
		dec.Inputs = append(dec.Inputs, events.DecisionInput{Kind: resolve.InputProfile, Name: fmt.Sprintf("profile-%d", i),
			Origin: fmt.Sprintf("agents/profile-%d.md", i), Digest: &digest})
	}
	d.Decision = dec
	meta := testMeta("T-42")
	var n int
	b.ReportAllocs()
	for b.Loop() {
		_, _, body, err := events.EncodeResolved("", meta, &d)
		if err != nil {
			b.Fatal(err)
		}
		n = len(body)
	}
	b.SetBytes(int64(n))
}

func BenchmarkEncodeFailed(b *testing.B) {
	f := &events.FailureData{TaskID: ptr("T-44"), Stage: resolve.StageResolve, Code: resolve.CodeModeConflict,
		Subject: ptr("slow"), Details: map[string]any{"modes": []string{"fast", "slow"}}, Message: "conflict"}
	meta := testMeta("T-44")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := events.EncodeFailed("", meta, f); err != nil {
			b.Fatal(err)
		}
	}
}

// largeResolved is resolvedFor(fullTask) with a prompt of about 2.7 KB of
// prose (a line break every 70-odd bytes, now and then a quote) ending
// in extra, and a short preamble before it in the system message: an
// outcome of about 7 KB, like the bench workload's.
func largeResolved(b testing.TB, extra string) *events.ResolvedData {
	d := *resolvedFor(b, fullTask, nil)
	var p strings.Builder
	for p.Len() < 2500 {
		p.WriteString("Prefer boring technology that the team already operates. Write every\n")
		p.WriteString("decision down with the alternatives considered and why they lost. When a\n")
		p.WriteString("choice is hard to reverse, say so in the first paragraph & name who must\n")
		p.WriteString("agree before it is made. Never invent an owner: write \"unassigned\".\n\n")
	}
	p.WriteString(extra)
	d.PromptBody = p.String()
	d.SystemMessage = strings.Repeat("You are part of rolecall, a fleet of agents; follow the \"rules\".\n", 4) + "\n" + d.PromptBody
	return &d
}

func BenchmarkOutcomeID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = events.OutcomeID(testSource, testID)
	}
}
