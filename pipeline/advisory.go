package pipeline

import (
	"encoding/json"
	"fmt"
)

// maxDeliveriesAdvisory is the part of JetStream's
// io.nats.jetstream.advisory.v1.max_deliver advisory the worker needs.
type maxDeliveriesAdvisory struct {
	Type       string `json:"type"`
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

func decodeMaxDeliveriesAdvisory(data []byte) (maxDeliveriesAdvisory, error) {
	var a maxDeliveriesAdvisory
	if err := json.Unmarshal(data, &a); err != nil {
		return a, fmt.Errorf("max-deliveries advisory: %w", err)
	}
	if a.StreamSeq == 0 {
		return a, fmt.Errorf("max-deliveries advisory without stream_seq")
	}
	return a, nil
}
