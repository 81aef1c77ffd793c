package discover

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

func TestClosestNames(t *testing.T) {
	names := []string{"analysis", "default", "payments", "payments-eu", "research", "team", "teams", "web"}
	tests := []struct {
		name string
		want []string
	}{
		{"tean", []string{"team"}},
		{"reserch", []string{"research"}},
		{"payment", []string{"payments", "payments-eu"}},
		{"pay", []string{"payments", "payments-eu"}}, // a prefix of 3 bytes or more
		{"we", []string{"web"}},
		{"x", nil},
		{"zzzzzzzz", nil},
		{"Team", []string{"team"}},
		{"tema", []string{"team"}},
		{"teamz", []string{"team", "teams"}},
	}
	for _, tt := range tests {
		got := closestNames(tt.name, names, maxClosest)
		if len(got) == 0 && len(tt.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("closestNames(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b  string
		limit int
		d     int
		ok    bool
	}{
		{"team", "team", 1, 0, true},
		{"tean", "team", 1, 1, true},
		{"", "abc", 3, 3, true},
		{"kitten", "sitting", 3, 3, true},
		{"kitten", "sitting", 2, 0, false},
		{"abc", "xyz", 2, 0, false},
		{"ghots", "ghost", 1, 1, true}, // a swap is one edit
		{"ab", "ba", 1, 1, true},
		{"abcd", "badc", 2, 2, true},
	}
	for _, tt := range tests {
		d, ok := editDistance(new(distanceRows), tt.a, tt.b, tt.limit)
		if d != tt.d || ok != tt.ok {
			t.Errorf("editDistance(%q, %q, %d) = %d, %t; want %d, %t", tt.a, tt.b, tt.limit, d, ok, tt.d, tt.ok)
		}
	}
}

func manyPacks(n int) *Snapshot {
	s := &Snapshot{Packs: map[string]*PackFile{}}
	for i := range n {
		s.Packs[fmt.Sprintf("team-%05d", i)] = &PackFile{}
	}
	return s
}

// TestPackNotFoundIsBounded: with thousands of packs the message of
// pack_not_found stays one short line (the closest names and a count),
// and the sorted name list is built once per snapshot, not per task.
func TestPackNotFoundIsBounded(t *testing.T) {
	s := manyPacks(5000)
	miss := func(name string) *Error {
		_, err := s.pack(&name)
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("pack(%q) = %v, want *Error", name, err)
		}
		return e
	}
	tests := []struct {
		name, want string
		closest    []string
	}{
		{"team-0042", `pack "team-0042" does not exist; did you mean one of "team-00042", "team-00142", "team-00242"? (5000 packs)`, []string{"team-00042", "team-00142", "team-00242"}},
		{"research", `pack "research" does not exist (5000 packs, none with a similar name)`, nil},
	}
	for _, tt := range tests {
		e := miss(tt.name)
		if e.Message != tt.want {
			t.Errorf("message\n %s\nwant\n %s", e.Message, tt.want)
		}
		if got, _ := e.Details()["closest"].([]string); !reflect.DeepEqual(got, tt.closest) {
			t.Errorf("details.closest = %q, want %q", got, tt.closest)
		}
	}
	first := &s.packNames()[0]
	miss("other")
	if &s.packNames()[0] != first {
		t.Error("the sorted pack names were built again for a second miss")
	}
	// Per failing task: a scan of the names at most, no list of them.
	for i, name := range []string{"research", "team-0042"} {
		allocs := testing.AllocsPerRun(20, func() { miss(fmt.Sprintf("%s-%d", name, i)) })
		if allocs > 20 {
			t.Errorf("%.0f allocations per pack_not_found of a new name with 5000 packs, want at most 20", allocs)
		}
	}
}

func TestPackNotFoundListsFewPacks(t *testing.T) {
	s := manyPacks(3)
	name := "team-00001x"
	_, err := s.pack(&name)
	want := `pack "team-00001x" does not exist; did you mean one of "team-00001", "team-00000", "team-00002"? (known: "team-00000", "team-00001", "team-00002")`
	if err == nil || err.(*Error).Message != want {
		t.Errorf("message %v, want %s", err, want)
	}
}

// BenchmarkPackNotFound: one name asked again and again (a planner's
// typo), and a new name each time (the scan).
func BenchmarkPackNotFound(b *testing.B) {
	for _, n := range []int{500, 5000} {
		b.Run(fmt.Sprintf("packs=%d/same", n), func(b *testing.B) {
			s := manyPacks(n)
			name := "team-0042"
			b.ReportAllocs()
			for b.Loop() {
				_, _ = s.pack(&name)
			}
		})
		b.Run(fmt.Sprintf("packs=%d/new", n), func(b *testing.B) {
			s := manyPacks(n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				name := fmt.Sprintf("team-%04d", i%10000)
				_, _ = s.pack(&name)
			}
		})
	}
}
