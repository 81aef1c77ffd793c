package events_test

import (
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

func BenchmarkOutcomeID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = events.OutcomeID(testSource, testID)
	}
}
