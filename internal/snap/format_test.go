package snap_test

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/flintkv/flint/internal/frame"
	"github.com/flintkv/flint/internal/snap"
	"go.etcd.io/raft/v3/raftpb"
)

// header2 returns a version 2 header frame at index 5, term 2 whose
// payload ends with tail: the configuration and the section count.
func header2(tail ...byte) []byte {
	p := append([]byte("FLNTSNP1"), binary.LittleEndian.AppendUint32(nil, 2)...)
	p = binary.LittleEndian.AppendUint64(p, 5)
	p = binary.LittleEndian.AppendUint64(p, 2)
	return frame.Append(nil, 1, append(p, tail...))
}

// conf2 is the encoding of conf2Want in a version 2 header: voters 1;
// learners 2; outgoing voters 1, 3; next learners 3; auto-leave.
var conf2 = []byte{1, 1, 1, 2, 2, 1, 3, 1, 3, 1}

var conf2Want = raftpb.ConfState{Voters: []uint64{1}, Learners: []uint64{2}, VotersOutgoing: []uint64{1, 3}, LearnersNext: []uint64{3}, AutoLeave: true}

// withSections returns conf2 followed by a section count of n.
func withSections(n uint64) []byte { return binary.AppendUvarint(slices.Clone(conf2), n) }

// sectionFrame returns a section frame of name that counts size bytes of
// data and holds data.
func sectionFrame(name string, size uint64, data string) []byte {
	p := binary.AppendUvarint(nil, uint64(len(name)))
	p = binary.AppendUvarint(append(p, name...), size)
	return frame.Append(nil, 4, append(p, data...))
}

func sectionData(data string) []byte { return frame.Append(nil, 5, []byte(data)) }

// TestBadContentV2 loads version 2 files of valid frames, with good and
// bad contents in their headers and sections.
func TestBadContentV2(t *testing.T) {
	hdr := header2(withSections(2)...)
	s1, s2a, s2b := sectionFrame("members", 5, "1=a:1"), sectionFrame("sessions", 6, "abc"), sectionData("def")
	pf, end := pairsFrame("a", "1", "bb", "22"), endFrame(2, 6)
	at := func(frames ...[]byte) int64 { return int64(len(build(frames...))) }
	v1 := header("FLNTSNP1", 1, 5, 2, 1)
	long := strings.Repeat("n", snap.MaxSectionName+1)
	for _, tc := range []struct {
		name  string
		file  []byte
		off   int64
		words []string
	}{
		{"valid", build(hdr, s1, s2a, s2b, pf, end), -1, nil},
		{"sections only", build(hdr, s1, s2a, s2b, endFrame(0, 0)), -2, nil},
		{"fewer sections than counted", build(hdr, s1, pf, end), at(hdr, s1), []string{"counts 2 sections, the file holds 1"}},
		{"no sections of 2", build(hdr, end), at(hdr), []string{"counts 2 sections, the file holds 0"}},
		{"more sections than counted", build(header2(withSections(1)...), s1, s2a, s2b, pf, end), at(header2(withSections(1)...), s1), []string{"more sections than the 1"}},
		{"a section after the pairs", build(header2(withSections(1)...), s1, pf, s2a, s2b, end), at(header2(withSections(1)...), s1, pf), []string{"a section after the pairs"}},
		{"a section cut short by the pairs", build(hdr, s1, s2a, pf, end), at(hdr, s1, s2a), []string{`section "sessions" ends after 3 of the 6 bytes`}},
		{"a section cut short by a section", build(hdr, s2a, s1, pf, end), at(hdr, s2a), []string{`section "sessions" ends after 3`}},
		{"a section cut short by the end", build(hdr, s1, s2a, endFrame(0, 0)), at(hdr, s1, s2a), []string{`ends after 3 of the 6`}},
		{"section data too long", build(hdr, s1, s2a, sectionData("defg"), pf, end), at(hdr, s1, s2a), []string{`section "sessions" holds more than the 6 bytes`}},
		{"a section frame too long", build(hdr, sectionFrame("members", 2, "1=a:1"), s2a, s2b, pf, end), at(hdr), []string{`section "members" holds more than the 2 bytes`}},
		{"section data and no section", build(hdr, sectionData("x"), s1, s2a, s2b, pf, end), at(hdr), []string{"section data that no section lacks"}},
		{"section data after a whole section", build(hdr, s1, sectionData("x"), s2a, s2b, pf, end), at(hdr, s1), []string{"section data that no section lacks"}},
		{"two sections of one name", build(hdr, s1, s1, pf, end), at(hdr, s1), []string{`two sections named "members"`}},
		{"a section without a name", build(hdr, sectionFrame("", 0, ""), s1, pf, end), at(hdr), []string{"without a name"}},
		{"a name too long", build(hdr, sectionFrame(long, 0, ""), s1, pf, end), at(hdr), []string{"bad section name length"}},
		{"a name longer than its frame", build(hdr, frame.Append(nil, 4, []byte{10, 'a'}), s1, pf, end), at(hdr), []string{"bad section name length"}},
		{"bad data length", build(hdr, frame.Append(nil, 4, []byte{1, 'a', 0xff}), s1, pf, end), at(hdr), []string{"bad section data length"}},
		{"a huge data length", build(hdr, sectionFrame("members", 1<<62, "x"), s2a, s2b, pf, end), at(hdr, sectionFrame("members", 1<<62, "x")), []string{"ends after 1 of the 4611686018427387904 bytes"}},
		{"too many sections", build(header2(withSections(snap.MaxSections+1)...), end), 0, []string{"bad section count 65: more than 64"}},
		{"bad auto-leave", build(header2(append(slices.Clone(conf2[:9]), 2, 0)...), end), 0, []string{"bad auto-leave flag"}},
		{"no auto-leave", build(header2(conf2[:9]...), end), 0, []string{"bad auto-leave flag"}},
		{"no section count", build(header2(conf2...), end), 0, []string{"bad section count"}},
		{"bad learner count", build(header2(1, 1, 9, 2), end), 0, []string{"bad learner count 9"}},
		{"a bad outgoing voter", build(header2(1, 1, 1, 2, 1, 0x80), end), 0, []string{"bad outgoing voter id"}},
		{"trailing header bytes", build(header2(append(withSections(0), 0)...), end), 0, []string{"trailing bytes in header"}},
		{"a section in a version 1 file", build(v1, s1, pf, end), at(v1), []string{"more sections than the 0"}},
		{"an unknown frame type", build(hdr, s1, s2a, s2b, frame.Append(nil, 6, nil), pf, end), at(hdr, s1, s2a, s2b), []string{"unknown frame type 6"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMem(t)
			name := "0000000000000005-0000000000000002.snap"
			writeFile(t, m, name, tc.file)
			meta, ps, err := load(m, name)
			if tc.off < 0 {
				if err != nil {
					t.Fatal(err)
				}
				checkMeta(t, meta, snap.Meta{Index: 5, Term: 2, Conf: conf2Want,
					Sections: []snap.Section{{Name: "members", Data: []byte("1=a:1")}, {Name: "sessions", Data: []byte("abcdef")}}})
				if tc.off == -1 {
					checkPairs(t, ps, []pair{{"a", []byte("1")}, {"bb", []byte("22")}})
				}
				return
			}
			checkSnapError(t, err, name, tc.off, tc.words...)
		})
	}
}

// TestWriteRejectsSections: sections a snapshot cannot hold fail Write,
// which leaves nothing behind.
func TestWriteRejectsSections(t *testing.T) {
	many := make([]snap.Section, snap.MaxSections+1)
	for i := range many {
		many[i].Name = string(rune('A' + i))
	}
	for _, tc := range []struct {
		name     string
		sections []snap.Section
		words    string
	}{
		{"too many", many, "65 sections, more than a snapshot holds (64)"},
		{"no name", []snap.Section{{Name: "a"}, {Name: ""}}, "a name has 1 to 64 bytes"},
		{"a long name", []snap.Section{{Name: strings.Repeat("n", snap.MaxSectionName+1)}}, "a name has 1 to 64 bytes"},
		{"a name twice", []snap.Section{{Name: "a"}, {Name: "b"}, {Name: "a"}}, `two sections named "a"`},
	} {
		m := newMem(t)
		_, _, err := snap.Write(m, dir, snap.Meta{Index: 3, Term: 1, Sections: tc.sections}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.words) || !strings.HasPrefix(err.Error(), "snap: writing ") {
			t.Fatalf("%s: Write returned %v, want an error saying %q", tc.name, err, tc.words)
		}
		if got := files(t, m); len(got) != 0 {
			t.Fatalf("%s: a failed Write left %v", tc.name, got)
		}
	}
	// The most a snapshot holds is fine.
	m := newMem(t)
	most := slices.Clone(many[:snap.MaxSections])
	most[0].Name = strings.Repeat("n", snap.MaxSectionName)
	name := mustWrite(t, m, m, snap.Meta{Index: 3, Term: 1, Sections: most}, nil)
	if meta, _, err := load(m, name); err != nil {
		t.Fatal(err)
	} else {
		checkMeta(t, meta, snap.Meta{Index: 3, Term: 1, Sections: most})
	}
}
