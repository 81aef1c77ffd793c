package resolve_test

import (
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/rolecall/rolecall/resolve"
)

// span is the memory behind one list (capacity included) or pointer of a
// result, with the path that reaches it.
type span struct {
	lo, hi uintptr
	path   string
}

// spans collects the memory of every non-empty-capacity slice and every
// pointer reachable from v (strings are immutable and left out).
func spans(v reflect.Value, path string, out *[]span) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		p := v.Pointer()
		*out = append(*out, span{p, p + v.Type().Elem().Size(), path})
		spans(v.Elem(), "(*"+path+")", out)
	case reflect.Slice:
		if v.Cap() > 0 {
			p := v.Pointer()
			*out = append(*out, span{p, p + uintptr(v.Cap())*v.Type().Elem().Size(), path})
		}
		for i := range v.Len() {
			spans(v.Index(i), path+"[i]", out)
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			spans(it.Value(), path+"["+it.Key().String()+"]", out)
		}
	case reflect.Interface:
		if !v.IsNil() {
			spans(v.Elem(), path, out)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			spans(v.Field(i), path+"."+v.Type().Field(i).Name, out)
		}
	}
}

// TestPropertyResultParts: no two lists or pointers of one result share
// memory, spare capacity included, so writing to (or appending to) one
// part of a result can never change another part. The result's lists are
// carved from shared allocations; this is the property that makes that
// safe.
func TestPropertyResultParts(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sc := genScenario.Draw(t, "scenario")
		spec, err := resolve.Resolve(sc.ref, sc.in)
		if err != nil {
			return
		}
		var all []span
		spans(reflect.ValueOf(spec), "spec", &all)
		for i, a := range all {
			for _, b := range all[i+1:] {
				nested := strings.HasPrefix(b.path, "(*"+a.path+")") || strings.HasPrefix(a.path, "(*"+b.path+")")
				if a.lo < b.hi && b.lo < a.hi && !nested {
					t.Fatalf("%s and %s share memory", a.path, b.path)
				}
			}
		}
	})
}
