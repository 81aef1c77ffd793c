package pipeline

import (
	"strconv"

	"github.com/rolecall/rolecall/discover"
)

// HeaderConfigRevision is the header of an outcome decided with a config
// bundle from NATS: the bundle's revision, so a consumer can tell which
// configuration of the fleet decided it. Outcomes decided from files do
// not carry it.
const HeaderConfigRevision = "Rolecall-Config-Revision"

func configRevision(snap *discover.Snapshot) string {
	if snap == nil || snap.ConfigSource != discover.ConfigFromNATS {
		return ""
	}
	return strconv.FormatUint(snap.Revision, 10)
}
