//go:build !unix

package discover_test

func platformLoadCases() []loadErrorCase { return nil }
