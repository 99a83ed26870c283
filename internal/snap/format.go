package snap

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// fixedHeader is the size of the header's fixed fields: magic, version,
// index and term.
const fixedHeader = len(magic) + 4 + 8 + 8

// appendHeader appends the payload of m's header frame, of the current
// version, to b.
func appendHeader(b []byte, m Meta) []byte {
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint64(b, m.Index)
	b = binary.LittleEndian.AppendUint64(b, m.Term)
	for _, ids := range [][]uint64{m.Conf.Voters, m.Conf.Learners, m.Conf.VotersOutgoing, m.Conf.LearnersNext} {
		b = binary.AppendUvarint(b, uint64(len(ids)))
		for _, id := range ids {
			b = binary.AppendUvarint(b, id)
		}
	}
	autoLeave := byte(0)
	if m.Conf.AutoLeave {
		autoLeave = 1
	}
	b = append(b, autoLeave)
	return binary.AppendUvarint(b, uint64(len(m.Sections)))
}

// decodeHeader decodes a header payload of version 1 or 2, and returns the
// number of sections it counts.
func decodeHeader(p []byte) (Meta, int, error) {
	if len(p) < fixedHeader || string(p[:len(magic)]) != magic {
		return Meta{}, 0, errors.New("not a Flint snapshot (bad magic)")
	}
	v := binary.LittleEndian.Uint32(p[len(magic):])
	if v != 1 && v != version {
		return Meta{}, 0, fmt.Errorf("snapshot format version %d, this build reads versions 1 and %d", v, version)
	}
	m := Meta{Index: binary.LittleEndian.Uint64(p[len(magic)+4:]), Term: binary.LittleEndian.Uint64(p[len(magic)+12:])}
	d := &decoder{p: p[fixedHeader:]}
	m.Conf.Voters = d.ids("voter")
	if v == 1 {
		return m, 0, d.done("header")
	}
	m.Conf.Learners = d.ids("learner")
	m.Conf.VotersOutgoing = d.ids("outgoing voter")
	m.Conf.LearnersNext = d.ids("next learner")
	m.Conf.AutoLeave = d.flag("auto-leave")
	n := d.count("section", MaxSections)
	return m, n, d.done("header")
}

// appendSection appends the payload of the section frame of s to b: its
// name, the length of its data, and the first n bytes of the data.
func appendSection(b []byte, s Section, n int) []byte {
	b = binary.AppendUvarint(b, uint64(len(s.Name)))
	b = append(b, s.Name...)
	b = binary.AppendUvarint(b, uint64(len(s.Data)))
	return append(b, s.Data[:n]...)
}

// decodeSection decodes a section frame's payload: the section's name, the
// length of its whole data, and the data's first bytes, which alias p.
func decodeSection(p []byte) (name string, size uint64, data []byte, err error) {
	d := &decoder{p: p}
	name = string(d.field("section name", MaxSectionName))
	size = d.uvarint("section data length")
	if d.err == nil && name == "" {
		d.err = errors.New("a section without a name")
	}
	return name, size, d.p, d.err
}

// checkSections returns an error unless ss can be written: at most
// MaxSections, with unique names of 1 to MaxSectionName bytes.
func checkSections(ss []Section) error {
	if len(ss) > MaxSections {
		return fmt.Errorf("%d sections, more than a snapshot holds (%d)", len(ss), MaxSections)
	}
	for i, s := range ss {
		if s.Name == "" || len(s.Name) > MaxSectionName {
			return fmt.Errorf("section name %.80q: a name has 1 to %d bytes", s.Name, MaxSectionName)
		}
		if j := sectionIndex(ss[:i], s.Name); j >= 0 {
			return fmt.Errorf("two sections named %q", s.Name)
		}
	}
	return nil
}

// sectionIndex returns the index in ss of the section named name, or -1.
// A linear search: there are at most MaxSections.
func sectionIndex(ss []Section, name string) int {
	for i, s := range ss {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// decoder reads the varints and fields of a payload. The first error
// stops it: later reads return zero values.
type decoder struct {
	p   []byte // what is left
	err error
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, w := binary.Uvarint(d.p)
	if w <= 0 {
		d.err = fmt.Errorf("bad %s", what)
		return 0
	}
	d.p = d.p[w:]
	return v
}

// count reads a count of at most most.
func (d *decoder) count(what string, most int) int {
	n := d.uvarint(what + " count")
	if d.err == nil && n > uint64(most) {
		d.err = fmt.Errorf("bad %s count %d: more than %d", what, n, most)
		return 0
	}
	return int(n)
}

// ids reads a list of ids. Each takes a byte at least, so a count larger
// than the bytes left is damage, which bounds the list by the payload.
func (d *decoder) ids(what string) []uint64 {
	n := d.count(what, len(d.p))
	if n == 0 {
		return nil
	}
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = d.uvarint(what + " id")
	}
	return ids
}

// flag reads a byte that is 0 or 1.
func (d *decoder) flag(what string) bool {
	if d.err == nil && (len(d.p) == 0 || d.p[0] > 1) {
		d.err = fmt.Errorf("bad %s flag", what)
	}
	if d.err != nil {
		return false
	}
	f := d.p[0] == 1
	d.p = d.p[1:]
	return f
}

// field reads a length and that many bytes, at most most, which alias the
// payload.
func (d *decoder) field(what string, most int) []byte {
	n := d.count(what+" length", min(most, len(d.p)))
	if d.err != nil {
		return nil
	}
	f := d.p[:n]
	d.p = d.p[n:]
	return f
}

// done returns the decoder's error, or one if bytes are left.
func (d *decoder) done(what string) error {
	if d.err == nil && len(d.p) != 0 {
		return fmt.Errorf("trailing bytes in %s", what)
	}
	return d.err
}
