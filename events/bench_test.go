package events_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/resolve"
)

// The hot path per task is one DecodeTask and one EncodeResolved (or
// EncodeFailed); the target is well under 20 µs for both together.

func benchmarkDecodeTask(b *testing.B, binary bool) {
	h, body, err := events.EncodeTask(testSource, testID, []byte(fullTask), testTP, testTS, binary)
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
}

func BenchmarkDecodeTaskStructured(b *testing.B) { benchmarkDecodeTask(b, false) }
func BenchmarkDecodeTaskBinary(b *testing.B)     { benchmarkDecodeTask(b, true) }

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

func BenchmarkEncodeResolved(b *testing.B) {
	d := resolvedFor(b, fullTask, nil)
	meta := testMeta("T-42")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := events.EncodeResolved("", meta, d); err != nil {
			b.Fatal(err)
		}
	}
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

// The Append forms write into one reused buffer, as the worker does with
// its pooled bodies; what remains allocated is headers and subject.
func BenchmarkAppendResolved(b *testing.B) {
	d := resolvedFor(b, fullTask, nil)
	meta := testMeta("T-42")
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		_, _, body, err := events.AppendResolved(buf, "", meta, d)
		if err != nil {
			b.Fatal(err)
		}
		buf = body
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkAppendResolvedLarge is about the size of the bench workload's
// outcomes (7-8 KB): a 3 KB prompt of prose, quoted twice. As in the
// worker, successive outcomes hold prompts built anew, equal but for the
// task's extra prompt at the end.
func BenchmarkAppendResolvedLarge(b *testing.B) {
	var ds [2]*events.ResolvedData
	for i := range ds {
		ds[i] = largeResolved(b, fmt.Sprintf("Fix ticket T-%d.", i))
	}
	meta := testMeta("T-42")
	var buf []byte
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		_, _, body, err := events.AppendResolved(buf, "", meta, ds[i%2])
		if err != nil {
			b.Fatal(err)
		}
		buf = body
	}
	b.SetBytes(int64(len(buf)))
}

// largeResolved is resolvedFor(fullTask) with a prompt of about 3 KB of
// prose (a line break every 70-odd bytes, now and then a quote) ending
// in extra, and a preamble before it in the system message, like the
// bench workload's.
func largeResolved(b testing.TB, extra string) *events.ResolvedData {
	d := *resolvedFor(b, fullTask, nil)
	var p strings.Builder
	for p.Len() < 3000 {
		p.WriteString("Prefer boring technology that the team already operates. Write every\n")
		p.WriteString("decision down with the alternatives considered and why they lost. When a\n")
		p.WriteString("choice is hard to reverse, say so in the first paragraph & name who must\n")
		p.WriteString("agree before it is made. Never invent an owner: write \"unassigned\".\n\n")
	}
	p.WriteString(extra)
	d.PromptBody = p.String()
	// The built-in preamble is about 600 bytes.
	d.SystemMessage = strings.Repeat("You are part of rolecall, a fleet of agents; follow the \"rules\".\n", 9) + "\n" + d.PromptBody
	return &d
}

func BenchmarkAppendFailed(b *testing.B) {
	f := &events.FailureData{TaskID: ptr("T-44"), Stage: resolve.StageResolve, Code: resolve.CodeModeConflict,
		Subject: ptr("slow"), Details: map[string]any{"modes": []string{"fast", "slow"}}, Message: "conflict"}
	meta := testMeta("T-44")
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		_, _, body, err := events.AppendFailed(buf, "", meta, f)
		if err != nil {
			b.Fatal(err)
		}
		buf = body
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkOutcomeID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = events.OutcomeID(testSource, testID)
	}
}
