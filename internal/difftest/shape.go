package difftest

import "github.com/flintkv/flint/internal/protocol"

// SameShape reports whether two replies have the same shape: the same RESP
// type, and for aggregates the same number of elements, each of the same
// shape as its counterpart. Strings, numbers and booleans may differ.
func SameShape(a, b protocol.Value) bool {
	if a.Kind != b.Kind || len(a.Elems) != len(b.Elems) {
		return false
	}
	for i := range a.Elems {
		if !SameShape(a.Elems[i], b.Elems[i]) {
			return false
		}
	}
	return true
}
