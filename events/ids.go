package events

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// OutcomeIDPrefix starts every outcome id.
const OutcomeIDPrefix = "rc-"

// OutcomeID is the id of every outcome of the input event (source, id):
//
//	"rc-" + hex(sha256(source + "\x00" + id))[:32]
//
// It depends on nothing but the input's CloudEvents identity, so every
// worker and every redelivery computes the same id. It is also the
// outcome's Nats-Msg-Id: whichever outcome of one input is published
// first stands and JetStream drops the others inside the duplicate window.
// CloudEvents attribute values cannot hold NUL, so the separator is
// unambiguous. Both arguments must be non-empty; use OutcomeIDForSequence
// for an input without a usable source or id.
func OutcomeID(inputSource, inputID string) string {
	return hashID(inputSource + "\x00" + inputID)
}

// OutcomeIDForSequence is the outcome id of an input whose source or id
// cannot be read, derived from its place in the tasks stream:
//
//	"rc-" + hex(sha256("\x00seq\x00" + stream + "\x00" + decimal(seq)))[:32]
//
// The leading NUL keeps it apart from every OutcomeID (a source is never
// empty and never holds NUL). The stream sequence of a message does not
// change across redeliveries, so this id is as stable as OutcomeID.
func OutcomeIDForSequence(stream string, seq uint64) string {
	return hashID("\x00seq\x00" + stream + "\x00" + strconv.FormatUint(seq, 10))
}

func hashID(s string) string {
	sum := sha256.Sum256([]byte(s))
	return OutcomeIDPrefix + hex.EncodeToString(sum[:16])
}
