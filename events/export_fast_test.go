package events

// The original decoder, kept as the fast path's fallback, is the oracle
// of the differential tests (decode_fast_test.go).
var (
	DecodeTaskSlow     = decodeTaskSlow
	DecodeTaskFast     = decodeTaskFast
	DecodeTaskDataSlow = decodeTaskDataSlow
	DecodeTaskDataFast = decodeTaskDataFast
)
