package store

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// ttlModel is the obviously correct keyspace with deadlines that
// TestExpiryModel compares the store against: a key is there while the
// clock, in whole milliseconds, is not past its deadline.
type ttlModel struct {
	now  int64 // the clock, Unix ms: the largest stamp seen
	keys map[string]ttlEntry
}

type ttlEntry struct {
	val string
	at  int64
	has bool // at is a deadline
}

// get returns key's entry if it is there by the clock.
func (m *ttlModel) get(key string) (ttlEntry, bool) {
	e, ok := m.keys[key]
	if ok && e.has && m.now > e.at {
		delete(m.keys, key) // expired: as good as removed
		return ttlEntry{}, false
	}
	return e, ok
}

// expiryTest drives a store and a ttlModel with the same random commands,
// each in a batch of its own stamped with a fake clock that mostly moves
// forward, sometimes stays, and sometimes goes back (a new leader's clock
// behind its predecessor's), which the store must ignore.
type expiryTest struct {
	t     *testing.T
	rng   *rand.Rand
	s     *Store
	m     ttlModel
	index uint64
	time  int64 // the next stamp's time, Unix ns
	keys  []string
	trace []string
}

func TestExpiryModel(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed>>32|1))
	stripes := []int{1, 4, 64}[rng.IntN(3)]
	start := int64(1_700_000_000_000)
	et := &expiryTest{t: t, rng: rng, s: New(Options{Stripes: stripes, fresh: 4}), m: ttlModel{keys: map[string]ttlEntry{}}, time: start * 1e6}
	for i := range 40 {
		et.keys = append(et.keys, fmt.Sprintf("k%d", i))
	}
	ops := *opsFlag
	for i := range ops {
		et.step()
		if i%500 == 499 {
			et.checkAll()
			et.restart()
		}
		if t.Failed() {
			t.Logf("last operations:\n%s", et.traceTail())
			return
		}
	}
	et.checkAll()
}

func (et *expiryTest) traceTail() string {
	var b []byte
	for _, l := range et.trace[max(0, len(et.trace)-30):] {
		b = append(b, l...)
		b = append(b, '\n')
	}
	return string(b)
}

// apply applies one entry in a batch of its own, stamped with the next
// time, which the model's clock follows as the store's must.
func (et *expiryTest) apply(op Op, flags byte, args ...[]byte) Result {
	et.t.Helper()
	switch r := et.rng.IntN(10); {
	case r < 6:
		et.time += et.rng.Int64N(15) * 100e6 // whole steps: deadlines are often met exactly
	case r < 7:
		et.time -= et.rng.Int64N(30) * 100e6
	case r < 8:
		et.time += et.rng.Int64N(1e6) // within the millisecond
	}
	et.index++
	et.m.now = max(et.m.now, et.time/1e6)
	var b Batch
	b.Add(op, flags, args...)
	var res Result
	if err := et.s.ApplyBatchAt(b.Bytes(), Stamp{Index: et.index, Time: et.time}, func(_ int, r Result) { res = r }); err != nil {
		et.t.Fatalf("op %d: %v", op, err)
	}
	return res
}

func (et *expiryTest) key() string { return et.keys[et.rng.IntN(len(et.keys))] }

// deadline returns a deadline argument and its absolute value by the
// model's clock: relative or absolute, mostly in the future.
func (et *expiryTest) deadline() (flags byte, arg, at int64) {
	ms := (et.rng.Int64N(40) - 5) * 100
	if et.rng.IntN(2) == 0 {
		return ExpireRelative, ms, -1 // resolved once the stamp is known
	}
	return 0, et.m.now + ms, et.m.now + ms
}

func (et *expiryTest) step() {
	k := et.key()
	kb := []byte(k)
	v := strconv.Itoa(et.rng.IntN(100))
	switch et.rng.IntN(12) {
	case 0, 1: // SET with NX, XX, GET, KEEPTTL
		flags := []byte{0, SetNX, SetXX, SetGet, SetKeepTTL, SetGet | SetKeepTTL}[et.rng.IntN(6)]
		res := et.apply(OpSet, flags, kb, []byte(v))
		et.trace = append(et.trace, fmt.Sprintf("SET %s %s flags %d at %d: %+v", k, v, flags, et.m.now, res))
		old, found := et.m.get(k)
		et.checkSet(res, old, found, flags)
		if res.Done {
			e := ttlEntry{val: v}
			if flags&SetKeepTTL != 0 && found {
				e.at, e.has = old.at, old.has
			}
			et.m.keys[k] = e
		}
	case 2, 3: // SET with a deadline
		flags, arg, at := et.deadline()
		flags |= []byte{0, SetNX, SetXX, SetGet}[et.rng.IntN(4)]
		res := et.apply(OpSetExpire, flags, kb, []byte(v), DeadlineArg(arg))
		if at < 0 {
			at = et.m.now + arg
		}
		et.trace = append(et.trace, fmt.Sprintf("SETEXPIRE %s %s flags %d arg %d at %d: %+v", k, v, flags, arg, et.m.now, res))
		old, found := et.m.get(k)
		et.checkSet(res, old, found, flags)
		if res.Done {
			et.m.keys[k] = ttlEntry{val: v, at: at, has: true}
		}
	case 4, 5: // EXPIRE with NX, XX, GT, LT, GET
		flags, arg, at := et.deadline()
		flags |= []byte{0, ExpireNX, ExpireXX, ExpireGT, ExpireLT, ExpireGT | ExpireXX, ExpireLT | ExpireXX, ExpireGet}[et.rng.IntN(8)]
		res := et.apply(OpExpire, flags, kb, DeadlineArg(arg))
		if at < 0 {
			at = et.m.now + arg
		}
		et.trace = append(et.trace, fmt.Sprintf("EXPIRE %s flags %d arg %d at %d: %+v", k, flags, arg, et.m.now, res))
		e, found := et.m.get(k)
		want := int64(0)
		if found && !((flags&ExpireNX != 0 && e.has) || (flags&ExpireXX != 0 && !e.has) ||
			(flags&ExpireGT != 0 && (!e.has || at <= e.at)) || (flags&ExpireLT != 0 && e.has && at >= e.at)) {
			want = 1
			if at <= et.m.now {
				delete(et.m.keys, k)
			} else {
				et.m.keys[k] = ttlEntry{val: e.val, at: at, has: true}
			}
		}
		et.checkGot(res, e, found, flags&ExpireGet != 0, want)
	case 6: // PERSIST
		flags := []byte{0, ExpireGet}[et.rng.IntN(2)]
		res := et.apply(OpPersist, flags, kb)
		et.trace = append(et.trace, fmt.Sprintf("PERSIST %s at %d: %+v", k, et.m.now, res))
		e, found := et.m.get(k)
		want := int64(0)
		if found && e.has {
			want = 1
			et.m.keys[k] = ttlEntry{val: e.val}
		}
		et.checkGot(res, e, found, flags&ExpireGet != 0, want)
	case 7: // INCR and APPEND keep the deadline
		incr := et.rng.IntN(2) == 0
		var res Result
		if incr {
			res = et.apply(OpIncrBy, 0, kb, DeltaArg(1))
		} else {
			res = et.apply(OpAppend, 0, kb, []byte(v))
		}
		et.trace = append(et.trace, fmt.Sprintf("INCR(%v)/APPEND %s %s at %d: %+v", incr, k, v, et.m.now, res))
		e, _ := et.m.get(k)
		if !incr {
			e.val += v
		} else if n, ok := parseInt([]byte(e.val)); e.val == "" || ok {
			e.val = strconv.FormatInt(n+1, 10)
		} else {
			if res.Err == nil {
				et.t.Errorf("INCR %s of %q: %+v, want an error", k, e.val, res)
			}
			return
		}
		et.m.keys[k] = e
	case 8: // DEL
		res := et.apply(OpDel, 0, kb)
		et.trace = append(et.trace, fmt.Sprintf("DEL %s at %d: %+v", k, et.m.now, res))
		_, found := et.m.get(k)
		if (res.Int == 1) != found {
			et.t.Errorf("DEL %s at %d: %d, want found %v", k, et.m.now, res.Int, found)
		}
		delete(et.m.keys, k)
	case 9: // the expirer's removal, by a clock that may be behind the stamp
		var b Batch
		n := et.s.AppendDue(&b, et.m.now-et.rng.Int64N(1000), 1+et.rng.IntN(8))
		et.trace = append(et.trace, fmt.Sprintf("EXPIREDUE %d keys at %d", n, et.m.now))
		if n > 0 {
			et.index++
			if err := et.s.ApplyBatchAt(b.Bytes(), Stamp{Index: et.index, Time: et.time}, nil); err != nil {
				et.t.Fatal(err)
			}
		}
	default:
		et.checkKey(k)
	}
}

// checkSet checks the result of an OpSet or OpSetExpire against the
// model's entry before it.
func (et *expiryTest) checkSet(res Result, old ttlEntry, found bool, flags byte) {
	et.t.Helper()
	done := !(flags&SetNX != 0 && found) && !(flags&SetXX != 0 && !found)
	if res.Done != done || res.Found != found || (flags&SetGet != 0 && string(res.Val) != old.val) {
		et.t.Errorf("set at %d: %+v, want done %v found %v old %q", et.m.now, res, done, found, old.val)
	}
}

// checkGot checks the result of an OpExpire or OpPersist.
func (et *expiryTest) checkGot(res Result, e ttlEntry, found, get bool, want int64) {
	et.t.Helper()
	if res.Int != want || res.Found != found || (get && string(res.Val) != e.val) {
		et.t.Errorf("at %d: %+v, want %d found %v value %q", et.m.now, res, want, found, e.val)
	}
}

// checkKey checks the reads of one key against the model.
func (et *expiryTest) checkKey(k string) {
	et.t.Helper()
	e, found := et.m.get(k)
	v, ok := et.s.Get([]byte(k))
	at, has, ok2 := et.s.TTL([]byte(k))
	if ok != found || string(v) != e.val || ok2 != found || has != e.has || (has && at != e.at) {
		et.t.Errorf("key %s at %d: Get %q %v, TTL %d %v %v; want %+v %v", k, et.m.now, v, ok, at, has, ok2, e, found)
	}
	if n := et.s.Exists([][]byte{[]byte(k)}); (n == 1) != found {
		et.t.Errorf("EXISTS %s at %d: %d, want %v", k, et.m.now, n, found)
	}
}

// checkAll checks every key, and the range reads, against the model.
func (et *expiryTest) checkAll() {
	et.t.Helper()
	var want []string
	for _, k := range et.keys {
		et.checkKey(k)
		if e, ok := et.m.get(k); ok {
			want = append(want, k+"\x00"+e.val)
		}
	}
	slices.Sort(want)
	var got, gotN []string
	et.s.Snapshot().Range([]byte(""), []byte("\xff"), 0, func(k string, v []byte) bool {
		got = append(got, k+"\x00"+string(v))
		return true
	})
	for _, p := range et.s.RangeN([]byte(""), []byte("\xff"), 1000, nil) {
		gotN = append(gotN, p.Key+"\x00"+string(p.Val))
	}
	if !slices.Equal(got, want) || !slices.Equal(gotN, want) {
		et.t.Errorf("at %d: Range %q, RangeN %q, want %q", et.m.now, got, gotN, want)
	}
	et.checkNextDeadline()
	keys := make([][]byte, len(et.keys))
	for i, k := range et.keys {
		keys[i] = []byte(k)
	}
	et.s.MGet(keys, func(i int, v []byte, found bool) {
		if e, ok := et.m.get(et.keys[i]); ok != found || string(v) != e.val {
			et.t.Errorf("MGET %s at %d: %q %v, want %+v %v", et.keys[i], et.m.now, v, found, e, ok)
		}
	})
}

// checkNextDeadline checks NextDeadline against the model: a deadline
// that has not passed is the earliest the model holds (an earlier one may
// be a key that has expired but is not removed yet).
func (et *expiryTest) checkNextDeadline() {
	et.t.Helper()
	want := int64(math.MaxInt64)
	for _, k := range et.keys {
		if e, ok := et.m.get(k); ok && e.has {
			want = min(want, e.at)
		}
	}
	if got := et.s.NextDeadline(); got > want || got >= et.m.now && got != want {
		et.t.Errorf("NextDeadline at %d: %d, want %d (or a passed one)", et.m.now, got, want)
	}
}

// restart replaces the store with one loaded from its snapshot and
// deadlines, as a restart or a follower's install does.
func (et *expiryTest) restart() {
	et.t.Helper()
	dl := et.s.Deadlines()
	s := New(Options{Stripes: len(et.s.stripes), fresh: 4})
	et.s.SnapshotAll().Ascend(func(k string, v []byte) bool {
		s.Put([]byte(k), slices.Clone(v))
		return true
	})
	if err := s.RestoreDeadlines(dl); err != nil {
		et.t.Fatal(err)
	}
	if s.Clock() != et.s.Clock() {
		et.t.Errorf("restored clock %d, want %d", s.Clock(), et.s.Clock())
	}
	et.s = s
	et.trace = append(et.trace, "RESTART")
}

func TestRestoreDeadlinesRefusesDamage(t *testing.T) {
	s := New(Options{})
	set(t, s, "a", "1")
	do(t, s, OpExpire, 0, "a", string(DeadlineArg(5000)))
	good := s.Deadlines()
	for _, b := range [][]byte{nil, good[:5], good[:len(good)-1], append(slices.Clone(good), 0), {2, 0, 0, 0, 0, 0, 0, 0, 0, 0}} {
		if err := New(Options{}).RestoreDeadlines(b); err == nil {
			t.Errorf("RestoreDeadlines(%x) succeeded", b)
		}
	}
	if err := New(Options{}).RestoreDeadlines(good); err == nil {
		t.Error("a deadline for a key the store does not hold was restored")
	}
	s2 := New(Options{})
	set(t, s2, "a", "x")
	if err := s2.RestoreDeadlines(good); err != nil {
		t.Fatal(err)
	}
	if at, has, _ := s2.TTL([]byte("a")); !has || at != 5000 {
		t.Errorf("TTL after restore: %d %v, want 5000", at, has)
	}
}

// TestExpireDueBounded checks that AppendDue names at most the keys asked
// for, in one entry per stripe, and that applying them removes only keys
// whose deadlines the clock has passed.
func TestExpireDueBounded(t *testing.T) {
	s := New(Options{Stripes: 8})
	var b Batch
	for i := range 1000 {
		b.Add(OpSetExpire, 0, []byte(fmt.Sprint("k", i)), []byte("v"), DeadlineArg(int64(1000+i%2)))
	}
	b.Add(OpSet, 0, []byte("forever"), []byte("v"))
	if err := s.ApplyBatchAt(b.Bytes(), Stamp{Index: 1, Time: 500e6}, nil); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if n := s.AppendDue(&b, 1000, 100); n != 0 {
		t.Fatalf("AppendDue at 1000 found %d due keys, want 0: a deadline is not passed at its own millisecond", n)
	}
	removed := 0
	for round := 0; round < 100 && s.Len() > 1; round++ {
		b.Reset()
		n := s.AppendDue(&b, 1001, 100)
		if n > 100 || b.Len() > 8 {
			t.Fatalf("AppendDue named %d keys in %d entries, want at most 100 in at most 8", n, b.Len())
		}
		// Stamped 1001 ms: only the deadlines of 1000 have passed.
		if err := s.ApplyBatchAt(b.Bytes(), Stamp{Index: uint64(round + 2), Time: 1001e6}, func(_ int, r Result) { removed += int(r.Int) }); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if removed != 500 || s.Len() != 501 {
		t.Errorf("removed %d keys, %d left; want 500 and 501", removed, s.Len())
	}
}
