package events

import "github.com/nats-io/nats.go"

// The reflection encoder, kept as the reference the hand-written one is
// tested against.

func AppendResolvedReflect(dst []byte, prefix string, meta OutcomeMeta, data *ResolvedData) (string, nats.Header, []byte, error) {
	return appendResolved(dst, prefix, meta, data, reflectBody)
}

func AppendFailedReflect(dst []byte, prefix string, meta OutcomeMeta, data *FailureData) (string, nats.Header, []byte, error) {
	return appendFailed(dst, prefix, meta, data, reflectBody)
}

// EncodeValueFast writes an open-typed value with the hand-written
// encoder; ok is false where it defers to the reflection encoder.
func EncodeValueFast(v any) (b []byte, ok bool) {
	var e fastEncoder
	b = e.value(nil, v, 1)
	return b, !e.bad
}

// QuoteFast quotes s with the hand-written encoder; ok is false for
// invalid UTF-8.
func QuoteFast(s string) (b []byte, ok bool) {
	var e fastEncoder
	b = e.str(nil, s)
	return b, !e.bad
}

// ErrFastDeferred is returned by the FastOnly forms where the fast
// encoder defers to the reflection encoder.
var ErrFastDeferred = errFastDeferred

func AppendResolvedFastOnly(dst []byte, prefix string, meta OutcomeMeta, data *ResolvedData) (string, nats.Header, []byte, error) {
	return appendResolved(dst, prefix, meta, data, fastBodyOnly)
}

func AppendFailedFastOnly(dst []byte, prefix string, meta OutcomeMeta, data *FailureData) (string, nats.Header, []byte, error) {
	return appendFailed(dst, prefix, meta, data, fastBodyOnly)
}

// QuotedCached reports whether the quoted form of prompt's head (all but
// its last block) is in the prompt table.
func QuotedCached(prompt string) bool { return ContentsCached(promptHead(prompt)) }

var PromptHead = promptHead

// ContentsCached reports whether the quoted contents of s itself are in
// the prompt table (as a system message's preamble is kept).
func ContentsCached(s string) bool {
	if len(s) < quotedMinLen || len(s) > quotedMaxLen {
		return false // never kept (contentsCached)
	}
	en := quotedTable[quotedHash(s)%quotedSlots].Load()
	return en != nil && en.s == s
}

// The original decoder, kept as the fast path's fallback, is the oracle
// of the differential tests (decode_fast_test.go).
var (
	DecodeTaskSlow     = decodeTaskSlow
	DecodeTaskFast     = decodeTaskFast
	DecodeTaskDataSlow = decodeTaskDataSlow
	DecodeTaskDataFast = decodeTaskDataFast
)

// FixedFilled reports whether f holds encoded fields.
func FixedFilled(f *FixedFields) bool { return f.filled }
