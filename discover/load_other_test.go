//go:build !unix

package discover_test

import "testing"

func platformLoadCases() []loadErrorCase { return nil }

func mkfifo(t *testing.T, _ string) { t.Skip("no FIFOs on this platform") }
