package coded_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rolecall/rolecall/internal/coded"
)

type codeA string
type codeB string

func TestErrorsMatchByCodeAndCodeType(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", coded.New(codeA("missing"), nil, "no %s", "thing"))
	if got := err.Error(); got != "wrapped: missing: no thing" {
		t.Errorf("Error() = %q", got)
	}
	if !errors.Is(err, &coded.Error[codeA]{Code: "missing"}) {
		t.Error("errors.Is does not match the same code")
	}
	if errors.Is(err, &coded.Error[codeA]{Code: "other"}) {
		t.Error("errors.Is matches another code")
	}
	if errors.Is(err, &coded.Error[codeB]{Code: "missing"}) {
		t.Error("errors.Is matches the same code of another package's code type")
	}
	var e *coded.Error[codeA]
	if !errors.As(err, &e) || e.Details == nil || len(e.Details) != 0 {
		t.Errorf("errors.As: %v, details %v (want {} for nil)", e, e.Details)
	}
}
