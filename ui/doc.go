// Package ui is the worker's read-only audit view: one embedded page,
// /ui/, and the JSON endpoints it reads, /api/decisions (recent decisions,
// newest first, with filters and a cursor) and /api/decisions/{id} (one
// decision's record and its explain chain). Both read the specs stream
// (the audit log of outcomes and drift events); nothing here writes.
//
// The chain of a decision is the explain document (package explain) of
// the task its decision record holds, resolved again against the worker's
// current snapshot: the response says whether that snapshot is the one
// the decision was made with.
//
// Safety, in order of the threats it answers: the listener is separate
// from --http and off unless asked for; an address that is not loopback
// is refused without a bearer token, which /api/ then requires (compared
// in constant time); on loopback without a token, requests must name a
// loopback host, which keeps a DNS-rebinding page away; the page loads no
// external asset, never builds HTML from data (every value is set as
// text), and is served under a Content-Security-Policy that allows only
// its own script and style. List requests read at most a bounded number
// of messages (Options.MaxScan), walking back from the newest.
package ui
