package pipeline

// HeaderConfigRevision is the header of an outcome whose decision record
// cites a config bundle from NATS (decision.config.revision): the
// bundle's revision, so a consumer can tell which configuration of the
// fleet decided it without reading the data. Every such outcome carries
// it, delivery_exhausted and decode failures included; outcomes decided
// from files do not.
const HeaderConfigRevision = "Rolecall-Config-Revision"
