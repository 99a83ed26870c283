package replica

import (
	"errors"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/snap"
)

// TestRegistrations applies registrations to a replica's table: the first
// of a member is kept, the same again changes nothing, another marks the
// member lost, and one of this member under another incarnation than its
// own stops it; malformed ones are refused. The table survives a snapshot
// section.
func TestRegistrations(t *testing.T) {
	r := &Replica{opt: Options{Logger: quiet(), Incarnation: 7}, id: 1}
	apply := func(data []byte) error {
		return r.applyRegistration(&raftpb.Entry{Index: 9, Term: 2, Data: data})
	}
	for _, step := range []struct {
		data []byte
		err  error
	}{
		{registration(2, 5), nil},
		{registration(2, 5), nil},
		{registration(3, 6), nil},
		{registration(3, 8), nil}, // member 3 lost
		{registration(1, 7), nil}, // this member, this directory
		{[]byte{registrationKind}, errBadRegistration},
		{append(registration(2, 5), 0), errBadRegistration},
	} {
		if err := apply(step.data); (err == nil) != (step.err == nil) {
			t.Fatalf("registration %x: %v, want %v", step.data, err, step.err)
		}
	}
	if !r.registered.Load() || r.LostMember(2) || !r.LostMember(3) {
		t.Fatalf("registered %v, lost 2 %v, lost 3 %v", r.registered.Load(), r.LostMember(2), r.LostMember(3))
	}
	section := snap.Section{Name: incarnationsSection, Data: r.encodeIncarnations()}
	restored := &Replica{opt: Options{Logger: quiet(), Incarnation: 7}, id: 1}
	if err := restored.restoreIncarnations([]snap.Section{section}); err != nil || !restored.registered.Load() ||
		!restored.LostMember(3) || restored.incarnations[2] != (incarnation{id: 5}) {
		t.Fatalf("restored %+v (%v)", restored.incarnations, err)
	}
	wiped := &Replica{opt: Options{Logger: quiet(), Incarnation: 99}, id: 2}
	if err := wiped.restoreIncarnations([]snap.Section{section}); !errors.Is(err, ErrDataLost) {
		t.Fatalf("member 2 under another incarnation: %v, want ErrDataLost", err)
	}
	if err := apply(registration(1, 70)); err != nil {
		t.Fatalf("another directory registering as this member: %v, want none here", err)
	}
	if !r.LostMember(1) {
		t.Fatal("this member is not marked lost after another directory registered as it")
	}
}
