package store

import (
	"math/rand/v2"
	"testing"
)

// TestKeyspaceModel is TestModel with the keyspace ops mixed in: GETDEL,
// RENAME, RENAMENX, COPY, SETRANGE and BITOP, checked against the model,
// among TestModel's own writes, reads, snapshots and checks.
func TestKeyspaceModel(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed>>32|1))
	stripes := []int{1, 4, 64}[rng.IntN(3)]
	fresh := []int{1, 3, defaultFresh}[rng.IntN(3)]
	hashBits := []int{0, 4}[rng.IntN(2)]
	t.Logf("%d stripes, fresh %d, hash bits %d", stripes, fresh, hashBits)
	mt := &modelTest{t: t, rng: rng, s: New(Options{Stripes: stripes, MaxValue: modelMaxValue, fresh: fresh, hashBits: hashBits}), m: model{}}
	for i := range 40 {
		mt.keys = append(mt.keys, string(rune('a'+i%26))+mt.randString("\x00b", 2))
	}
	for i := range *opsFlag / 2 {
		if rng.IntN(3) == 0 {
			mt.keyspaceStep(i)
		} else {
			mt.step(i)
		}
		if t.Failed() {
			mt.dumpTrace()
			return
		}
	}
	mt.checkAll(*opsFlag)
}

func (mt *modelTest) keyspaceStep(i int) {
	t, m := mt.t, mt.m
	src, dst := mt.key(), mt.key()
	sv, sFound := m[src]
	dv, dFound := m[dst]
	switch mt.rng.IntN(6) {
	case 0:
		mt.logf("%d: GETDEL %q", i, src)
		r := mt.apply(OpGetDel, 0, src)
		if r.Found != sFound || string(r.Val) != sv {
			t.Errorf("op %d: GETDEL = %+v, want %q, %v", i, r, sv, sFound)
		}
		delete(m, src)
	case 1, 2:
		nx := mt.rng.IntN(2) == 0
		mt.logf("%d: RENAME %q %q nx %v", i, src, dst, nx)
		r := mt.apply(OpRename, map[bool]byte{true: RenameNX}[nx], src, dst)
		done := sFound && !(nx && dFound)
		if (r.Err == ErrNoSuchKey) == sFound || r.Done != done {
			t.Errorf("op %d: RENAME = %+v, want Done %v", i, r, done)
		}
		if done && src != dst {
			delete(m, src)
			m[dst] = sv
		}
	case 3:
		replace := mt.rng.IntN(2) == 0
		mt.logf("%d: COPY %q %q replace %v", i, src, dst, replace)
		r := mt.apply(OpCopy, map[bool]byte{true: CopyReplace}[replace], src, dst)
		done := sFound && (replace || !dFound)
		if r.Err != nil || r.Done != done {
			t.Errorf("op %d: COPY = %+v, want Done %v", i, r, done)
		}
		if done {
			m[dst] = sv
		}
	case 4:
		off, data := mt.rng.IntN(modelMaxValue), mt.randString("xy", 6)
		mt.logf("%d: SETRANGE %q %d %q", i, dst, off, data)
		r := mt.apply(OpSetRange, 0, dst, string(Uint64Arg(uint64(off))), data)
		switch {
		case data == "":
			if r.Int != int64(len(dv)) {
				t.Errorf("op %d: SETRANGE of nothing = %+v, want %d", i, r, len(dv))
			}
		case off+len(data) > modelMaxValue:
			if r.Err != ErrTooLarge {
				t.Errorf("op %d: SETRANGE past MaxValue = %+v", i, r)
			}
		default:
			b := []byte(dv)
			for len(b) < off+len(data) {
				b = append(b, 0)
			}
			copy(b[off:], data)
			if r.Int != int64(len(b)) {
				t.Errorf("op %d: SETRANGE = %+v, want %d", i, r, len(b))
			}
			m[dst] = string(b)
		}
	case 5:
		mt.logf("%d: BITOP OR %q %q %q", i, dst, src, dst)
		r := mt.apply(OpBitOp, BitOr, dst, src, dst)
		b := make([]byte, max(len(sv), len(dv)))
		for j := range b {
			if j < len(sv) {
				b[j] |= sv[j]
			}
			if j < len(dv) {
				b[j] |= dv[j]
			}
		}
		if r.Int != int64(len(b)) {
			t.Errorf("op %d: BITOP = %+v, want %d", i, r, len(b))
		}
		if len(b) == 0 {
			delete(m, dst)
		} else {
			m[dst] = string(b)
		}
	}
	if mt.s.Len() != int64(len(m)) || mt.s.Bytes() != m.bytes() {
		t.Errorf("op %d: Len, Bytes = %d, %d; want %d, %d", i, mt.s.Len(), mt.s.Bytes(), len(m), m.bytes())
	}
}
