package store

import (
	"encoding/binary"
	"flag"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	seedFlag = flag.Uint64("seed", 0, "seed of the randomized tests; 0 picks one (also env FLINT_TEST_SEED)")
	opsFlag  = flag.Int("ops", 10000, "operations in TestModel")
)

// testSeed returns the seed a randomized test should use: -seed, else
// $FLINT_TEST_SEED, else the clock. The test logs it so a failure can be
// replayed.
func testSeed(t *testing.T) uint64 {
	seed := *seedFlag
	if seed == 0 {
		if env := os.Getenv("FLINT_TEST_SEED"); env != "" {
			var err error
			if seed, err = strconv.ParseUint(env, 10, 64); err != nil {
				t.Fatalf("FLINT_TEST_SEED=%q: %v", env, err)
			}
		}
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d: replay with -seed=%d or FLINT_TEST_SEED=%d", seed, seed, seed)
	return seed
}

// model is the obviously correct store the real one is compared against.
type model map[string]string

func (m model) sortedKeys() []string { return slices.Sorted(maps.Keys(m)) }

func (m model) bytes() int64 {
	var n int64
	for k, v := range m {
		n += int64(len(k) + len(v))
	}
	return n
}

// rangeOf returns the keys with start <= key <= end, at most limit if limit > 0.
func (m model) rangeOf(start, end string, limit int) []string {
	var out []string
	for _, k := range m.sortedKeys() {
		if start <= k && k <= end && (limit <= 0 || len(out) < limit) {
			out = append(out, k)
		}
	}
	return out
}

// modelTest runs random operations on a Store and a model side by side.
type modelTest struct {
	t     *testing.T
	rng   *rand.Rand
	s     *Store
	m     model
	keys  []string // the key space: small, so that operations collide
	trace []string // recent operations, printed on failure
	snaps []modelSnap
	sess  modelSession
}

// modelSession is a client that sends some of its writes through a
// session, and retries them (see sessionWrite).
type modelSession struct {
	id    uint64 // its client id; 0 until it opens the session
	at    Stamp  // the stamp of the last batch applied through ApplyBatchAt
	seq   uint64 // the next write's seq
	floor uint64 // the lowest seq it has not acknowledged
	sent  []sentWrite
}

// sentWrite is a write a session sent: its batch, and its result.
type sentWrite struct {
	seq   uint64
	batch []byte
	res   Result
}

// sessionWindow is how many of its last writes a modelSession has not
// acknowledged; it remembers twice as many, to retry.
const sessionWindow = 8

type modelSnap struct {
	sn *Snapshot
	m  model
	at int // operation number when taken
}

const modelMaxValue = 48

func TestModel(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed>>32|1))
	stripes := []int{1, 2, 4, 64}[rng.IntN(4)]
	// A small fresh makes the indexes seal and merge runs every few writes.
	fresh := []int{1, 2, 3, 8, defaultFresh}[rng.IntN(5)]
	// Hashes of 4 bits: most keys clash with another of their stripe.
	hashBits := []int{0, 4}[rng.IntN(2)]
	mt := &modelTest{t: t, rng: rng, s: New(Options{Stripes: stripes, MaxValue: modelMaxValue, fresh: fresh, hashBits: hashBits}), m: model{}}
	seen := map[string]bool{}
	for len(mt.keys) < 120 {
		k := mt.randString("\x00ab\xff", 4)
		if len(mt.keys)%3 == 0 {
			// Keys of 15 to 19 bytes: on either side of shortKey, and equal
			// in the 16 bytes of an item's pre but for the last.
			k = "fifteen bytes.." + k
		}
		if !seen[k] {
			seen[k] = true
			mt.keys = append(mt.keys, k)
		}
	}
	t.Logf("%d stripes, fresh %d, hash bits %d, %d ops", stripes, fresh, hashBits, *opsFlag)
	for i := range *opsFlag {
		mt.step(i)
		if t.Failed() {
			mt.dumpTrace()
			return
		}
	}
	mt.checkAll(*opsFlag)
	for _, ms := range mt.snaps {
		mt.checkSnap(ms, *opsFlag)
	}
	if t.Failed() {
		mt.dumpTrace()
	}
}

func (mt *modelTest) dumpTrace() {
	mt.t.Logf("last operations, oldest first:\n%s", strings.Join(mt.trace, "\n"))
}

func (mt *modelTest) randString(alphabet string, maxLen int) string {
	b := make([]byte, mt.rng.IntN(maxLen+1))
	for i := range b {
		b[i] = alphabet[mt.rng.IntN(len(alphabet))]
	}
	return string(b)
}

func (mt *modelTest) key() string { return mt.keys[mt.rng.IntN(len(mt.keys))] }

// val returns a random value: often an integer, sometimes one near the
// int64 limits or in a spelling INCRBY rejects.
func (mt *modelTest) val() string {
	switch mt.rng.IntN(6) {
	case 0:
		return strconv.Itoa(mt.rng.IntN(21) - 10)
	case 1:
		return []string{"9223372036854775807", "-9223372036854775808", "9223372036854775806", "+1", "01", "-0", " 1", ""}[mt.rng.IntN(8)]
	default:
		return mt.randString("xyz0\r\n", 12)
	}
}

func (mt *modelTest) delta() int64 {
	switch mt.rng.IntN(4) {
	case 0:
		return int64(mt.rng.Uint64())
	case 1:
		return []int64{1<<63 - 1, -1 << 63, 1, -1}[mt.rng.IntN(4)]
	default:
		return mt.rng.Int64N(21) - 10
	}
}

func (mt *modelTest) logf(format string, a ...any) {
	const keep = 30
	if len(mt.trace) == keep {
		mt.trace = mt.trace[1:]
	}
	mt.trace = append(mt.trace, fmt.Sprintf(format, a...))
}

func (mt *modelTest) apply(op Op, flags byte, args ...string) Result {
	r, err := mt.s.Apply(entryOf(op, flags, args...))
	if err != nil {
		mt.t.Fatalf("Apply(op %d %q): %v", op, args, err)
	}
	return r
}

func (mt *modelTest) step(i int) {
	t, m := mt.t, mt.m
	switch p := mt.rng.IntN(1000); {
	case p < 150: // SET with random flags
		k, v, flags := mt.key(), mt.val(), byte(mt.rng.IntN(8))
		mt.logf("%d: SET %q %q flags %b", i, k, v, flags)
		old, found := m[k]
		r := mt.apply(OpSet, flags, k, v)
		done := !(flags&SetNX != 0 && found) && !(flags&SetXX != 0 && !found)
		wantVal := ""
		if flags&SetGet != 0 {
			wantVal = old
		}
		if r.Done != done || r.Found != found || string(r.Val) != wantVal {
			t.Errorf("op %d: SET = %+v, want Done %v Found %v Val %q", i, r, done, found, wantVal)
		}
		if done {
			m[k] = v
		}
	case p < 250: // MSET
		args := mt.pairsArgs(1 + mt.rng.IntN(5))
		mt.logf("%d: MSET %q", i, args)
		mt.apply(OpMSet, 0, args...)
		for j := 0; j < len(args); j += 2 {
			m[args[j]] = args[j+1]
		}
	case p < 320: // MSETNX
		args := mt.pairsArgs(1 + mt.rng.IntN(3))
		mt.logf("%d: MSETNX %q", i, args)
		r := mt.apply(OpMSetNX, 0, args...)
		none := true
		for j := 0; j < len(args); j += 2 {
			if _, ok := m[args[j]]; ok {
				none = false
			}
		}
		if r.Done != none {
			t.Errorf("op %d: MSETNX Done = %v, want %v", i, r.Done, none)
		}
		for j := 0; none && j < len(args); j += 2 {
			m[args[j]] = args[j+1]
		}
	case p < 420: // DEL
		var keys []string
		for range 1 + mt.rng.IntN(4) {
			keys = append(keys, mt.key())
		}
		mt.logf("%d: DEL %q", i, keys)
		r := mt.apply(OpDel, 0, keys...)
		var n int64
		for _, k := range keys {
			if _, ok := m[k]; ok {
				n++
				delete(m, k)
			}
		}
		if r.Int != n {
			t.Errorf("op %d: DEL = %d, want %d", i, r.Int, n)
		}
	case p < 520: // INCRBY
		k, d := mt.key(), mt.delta()
		mt.logf("%d: INCRBY %q %d (value %q)", i, k, d, m[k])
		r := mt.apply(OpIncrBy, 0, k, string(DeltaArg(d)))
		want, wantErr := modelIncr(m, k, d)
		if r.Err != wantErr || (wantErr == nil && r.Int != want) {
			t.Errorf("op %d: INCRBY = %d, %v; want %d, %v", i, r.Int, r.Err, want, wantErr)
		}
		if wantErr == nil {
			m[k] = strconv.FormatInt(want, 10)
		}
	case p < 600: // APPEND
		k, suffix := mt.key(), mt.randString("ab", 20)
		mt.logf("%d: APPEND %q %q", i, k, suffix)
		r := mt.apply(OpAppend, 0, k, suffix)
		nv := m[k] + suffix
		if len(nv) > modelMaxValue {
			if r.Err != ErrTooLarge {
				t.Errorf("op %d: APPEND to %d bytes = %+v, want ErrTooLarge", i, len(nv), r)
			}
			break
		}
		if r.Err != nil || r.Int != int64(len(nv)) {
			t.Errorf("op %d: APPEND = %+v, want %d", i, r, len(nv))
		}
		m[k] = nv
	case p < 660: // CAS
		k, v := mt.key(), mt.val()
		old, found := m[k]
		expected := old
		if mt.rng.IntN(2) == 0 {
			expected = mt.val()
		}
		mt.logf("%d: CAS %q %q %q", i, k, expected, v)
		r := mt.apply(OpCAS, 0, k, expected, v)
		done := found && old == expected
		if r.Done != done || r.Found != found {
			t.Errorf("op %d: CAS = %+v, want Done %v Found %v", i, r, done, found)
		}
		if done {
			m[k] = v
		}
	case p < 663: // FLUSH, rarely
		mt.logf("%d: FLUSH", i)
		mt.apply(OpFlush, 0)
		clear(m)
	case p < 733:
		mt.checkGets(i)
	case p < 900:
		start, end := mt.bound(), mt.bound()
		if mt.rng.IntN(4) == 0 {
			end = start
		}
		limit := mt.rng.IntN(12) - 2
		mt.checkRange(i, "store", mt.s.Range, m, start, end, limit)
		mt.checkRange(i, "RangeN", mt.rangeN, m, start, end, limit)
	case p < 920:
		if len(mt.snaps) == 3 {
			mt.snaps = slices.Delete(mt.snaps, 0, 1)
		}
		mt.logf("%d: snapshot", i)
		mt.snaps = append(mt.snaps, modelSnap{mt.s.Snapshot(), maps.Clone(m), i})
	case p < 960:
		if len(mt.snaps) > 0 {
			mt.checkSnap(mt.snaps[mt.rng.IntN(len(mt.snaps))], i)
		}
	case p < 980:
		mt.sessionWrite(i)
	default:
		mt.checkAll(i)
	}
	if mt.s.Len() != int64(len(m)) || mt.s.Bytes() != m.bytes() {
		t.Errorf("op %d: Len, Bytes = %d, %d; want %d, %d", i, mt.s.Len(), mt.s.Bytes(), len(m), m.bytes())
	}
}

// sessionWrite sends a write through the session, an INCRBY or a SET GET
// after an OpSeq, or retries one sent before. A retry must answer as the
// write did and change nothing, or, once the write is acknowledged, fail
// with ErrStaleSequence.
func (mt *modelTest) sessionWrite(i int) {
	ms := &mt.sess
	ms.at = Stamp{Index: ms.at.Index + 1, Time: ms.at.Time + 1000}
	if ms.id == 0 {
		ms.id = uint64(applyAt(mt.t, mt.s, ms.at, batchOf(AppendEntry(nil, OpSessionOpen, 0)))[0].Int)
	}
	if len(ms.sent) > 0 && mt.rng.IntN(2) == 0 {
		w := ms.sent[mt.rng.IntN(len(ms.sent))]
		mt.logf("%d: retry session write %d", i, w.seq)
		want := show(w.res)
		if w.seq < ms.floor {
			want = show(Result{Err: ErrStaleSequence})
		}
		if got := show(applyAt(mt.t, mt.s, ms.at, w.batch)[1]); got != want {
			mt.t.Errorf("op %d: retry of session write %d = %s, want %s", i, w.seq, got, want)
		}
		return
	}
	seq := ms.seq
	ms.seq++
	ms.floor = max(ms.floor, ms.seq-min(ms.seq, sessionWindow))
	k := mt.key()
	write := entryOf(OpSet, SetGet, k, mt.val())
	if mt.rng.IntN(2) == 0 {
		write = entryOf(OpIncrBy, 0, k, string(DeltaArg(mt.delta())))
	}
	mt.logf("%d: session write %d: %x", i, seq, write)
	batch := batchOf(AppendEntry(nil, OpSeq, 0, Uint64Arg(ms.id), Uint64Arg(seq), Uint64Arg(ms.floor)), write)
	r := applyAt(mt.t, mt.s, ms.at, batch)[1]
	mt.checkSessionWrite(i, write, r)
	ms.sent = append(ms.sent, sentWrite{seq, batch, r})
	if len(ms.sent) > 2*sessionWindow {
		ms.sent = ms.sent[1:]
	}
}

// checkSessionWrite checks r, the result of write, an INCRBY or a SET GET,
// against the model, and applies it there.
func (mt *modelTest) checkSessionWrite(i int, write []byte, r Result) {
	e, err := decodeEntry(write, nil)
	if err != nil {
		mt.t.Fatal(err)
	}
	k := string(e.args[0])
	if e.op == OpIncrBy {
		want, wantErr := modelIncr(mt.m, k, int64(binary.BigEndian.Uint64(e.args[1])))
		if r.Err != wantErr || (wantErr == nil && r.Int != want) {
			mt.t.Errorf("op %d: session INCRBY = %d, %v; want %d, %v", i, r.Int, r.Err, want, wantErr)
		}
		if wantErr == nil {
			mt.m[k] = strconv.FormatInt(want, 10)
		}
		return
	}
	old, found := mt.m[k]
	if !r.Done || r.Found != found || string(r.Val) != old {
		mt.t.Errorf("op %d: session SET GET = %+v, want Found %v Val %q", i, r, found, old)
	}
	mt.m[k] = string(e.args[1])
}

// pairsArgs returns n random key-value pairs; keys may repeat.
func (mt *modelTest) pairsArgs(n int) []string {
	var args []string
	for range n {
		args = append(args, mt.key(), mt.val())
	}
	return args
}

// bound returns a range bound: a key of the key space, or a string that may
// fall between keys.
func (mt *modelTest) bound() string {
	if mt.rng.IntN(2) == 0 {
		return mt.key()
	}
	return mt.randString("\x00a`b\xff", 5)
}

// modelIncr is INCRBY by the book: the value must be an integer in the
// spelling strconv.FormatInt gives, and the sum must not wrap.
func modelIncr(m model, k string, d int64) (int64, error) {
	var n int64
	if v, ok := m[k]; ok {
		var err error
		n, err = strconv.ParseInt(v, 10, 64)
		if err != nil || strconv.FormatInt(n, 10) != v {
			return 0, ErrNotInteger
		}
	}
	sum := n + d // wraps on overflow
	if (d > 0 && sum < n) || (d < 0 && sum > n) {
		return 0, ErrOverflow
	}
	return sum, nil
}

func (mt *modelTest) checkGets(i int) {
	var keys [][]byte
	var names []string
	n := mt.rng.IntN(5)
	if mt.rng.IntN(8) == 0 { // MGet looks up more than PrefetchKeys in groups
		n = PrefetchKeys + 1 + mt.rng.IntN(2*PrefetchKeys)
	}
	for range n {
		k := mt.key()
		keys, names = append(keys, []byte(k)), append(names, k)
	}
	mt.logf("%d: MGET/EXISTS %q", i, names)
	var exists int64
	calls := 0
	mt.s.MGet(keys, func(j int, v []byte, found bool) {
		calls++
		want, ok := mt.m[names[j]]
		if found != ok || string(v) != want {
			mt.t.Errorf("op %d: MGET %q = %q, %v; want %q, %v", i, names[j], v, found, want, ok)
		}
		if ok {
			exists++
		}
	})
	if calls != len(keys) {
		mt.t.Errorf("op %d: MGET of %d keys made %d calls", i, len(keys), calls)
	}
	if n := mt.s.Exists(keys); n != exists {
		mt.t.Errorf("op %d: EXISTS %q = %d, want %d", i, names, n, exists)
	}
	for _, k := range names {
		v, ok := mt.s.Get([]byte(k))
		if want, wok := mt.m[k]; ok != wok || string(v) != want {
			mt.t.Errorf("op %d: GET %q = %q, %v; want %q, %v", i, k, v, ok, want, wok)
		}
	}
}

// checkRange compares one Range call with the model, stopping it early at a
// random point one time in four.
func (mt *modelTest) checkRange(i int, what string, rangeFn func([]byte, []byte, int, func(string, []byte) bool), m model, start, end string, limit int) {
	want := m.rangeOf(start, end, limit)
	stop := -1 // fn returns false at this call
	if len(want) > 0 && mt.rng.IntN(4) == 0 {
		stop = 1 + mt.rng.IntN(len(want))
		want = want[:stop]
	}
	mt.logf("%d: %s RANGE %q %q limit %d stop %d", i, what, start, end, limit, stop)
	var got []string
	rangeFn([]byte(start), []byte(end), limit, func(k string, v []byte) bool {
		got = append(got, k)
		if string(v) != m[k] {
			mt.t.Errorf("op %d: %s RANGE gave %q=%q, want %q", i, what, k, v, m[k])
		}
		return len(got) != stop
	})
	if !slices.Equal(got, want) {
		mt.t.Errorf("op %d: %s RANGE %q %q limit %d stop %d = %q, want %q", i, what, start, end, limit, stop, got, want)
	}
}

func (mt *modelTest) checkSnap(ms modelSnap, i int) {
	mt.logf("%d: check snapshot from op %d", i, ms.at)
	if ms.sn.Len() != len(ms.m) {
		mt.t.Errorf("op %d: snapshot from op %d has Len %d, want %d", i, ms.at, ms.sn.Len(), len(ms.m))
	}
	mt.checkAscend(i, ms.sn, ms.m)
	start, end, limit := mt.bound(), mt.bound(), mt.rng.IntN(6)
	mt.checkRange(i, "snapshot", ms.sn.Range, ms.m, start, end, limit)
	if n, want := ms.sn.Count([]byte(start), []byte(end), limit), len(ms.m.rangeOf(start, end, limit)); n != want {
		mt.t.Errorf("op %d: snapshot Count %q %q %d = %d, want %d", i, start, end, limit, n, want)
	}
}

func (mt *modelTest) checkAll(i int) {
	mt.logf("%d: check everything", i)
	mt.checkAscend(i, mt.s.Snapshot(), mt.m)
}

func (mt *modelTest) checkAscend(i int, sn *Snapshot, m model) {
	var got []string
	sn.Ascend(func(k string, v []byte) bool {
		got = append(got, k)
		if string(v) != m[k] {
			mt.t.Errorf("op %d: Ascend gave %q=%q, want %q", i, k, v, m[k])
		}
		return true
	})
	if want := m.sortedKeys(); !slices.Equal(got, want) {
		mt.t.Errorf("op %d: Ascend = %q, want %q", i, got, want)
	}
}

// rangeN adapts RangeN to checkRange: RangeN needs a positive limit.
func (mt *modelTest) rangeN(start, end []byte, limit int, fn func(string, []byte) bool) {
	if limit <= 0 {
		limit = math.MaxInt
	}
	for _, p := range mt.s.RangeN(start, end, limit, nil) {
		if !fn(p.Key, p.Val) {
			return
		}
	}
}
