package bench

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// opKind is the type of a generated operation.
type opKind uint8

// The operation types, and the commands each sends.
const (
	opRead   opKind = iota // GET key
	opUpdate               // SET key value, key loaded
	opInsert               // SET key value, key new
	opScan                 // RANGE key end LIMIT n
	opRMW                  // GET key, then SET key value
	opTx                   // MULTI, SET of each of the txWrites keys, EXEC
	opSets                 // the same txWrites SETs, without MULTI and EXEC
	numOpKinds
)

// txWrites is how many SETs a tx or sets operation sends: to keys n .. n+txWrites-1.
const txWrites = 5

var opNames = [numOpKinds]string{"read", "update", "insert", "scan", "rmw", "tx", "sets"}

func (k opKind) String() string { return opNames[k] }

// workload is a named mix of operations over a key space.
type workload struct {
	name      string
	mix       [numOpKinds]float64 // proportion of each kind; sums to 1
	dist      string              // request distribution
	keys      keyFormat
	records   int // default record count
	valueSize int // default value length, bytes
}

// The workloads. cs6450 is the users' high-throughput workload: a million decimal keys,
// unscrambled zipfian, 128-byte values. The ycsb ones are YCSB's core
// workloads with their default request distributions and mixes; a record is
// one value of YCSB's fieldcount*fieldlength = 10*100 bytes. YCSB's default
// record count, 1000, fits in any cache; 100,000 is the default here.
var workloads = []workload{
	{name: "cs6450-a", mix: mix(0.5, 0.5, 0, 0, 0), dist: distZipfian, keys: decimalKeys, records: 1_000_000, valueSize: 128},
	{name: "cs6450-b", mix: mix(0.95, 0.05, 0, 0, 0), dist: distZipfian, keys: decimalKeys, records: 1_000_000, valueSize: 128},
	{name: "cs6450-c", mix: mix(1, 0, 0, 0, 0), dist: distZipfian, keys: decimalKeys, records: 1_000_000, valueSize: 128},
	{name: "ycsb-a", mix: mix(0.5, 0.5, 0, 0, 0), dist: distScrambled, keys: userKeys, records: 100_000, valueSize: 1000},
	{name: "ycsb-b", mix: mix(0.95, 0.05, 0, 0, 0), dist: distScrambled, keys: userKeys, records: 100_000, valueSize: 1000},
	{name: "ycsb-c", mix: mix(1, 0, 0, 0, 0), dist: distScrambled, keys: userKeys, records: 100_000, valueSize: 1000},
	{name: "ycsb-d", mix: mix(0.95, 0, 0.05, 0, 0), dist: distLatest, keys: userKeys, records: 100_000, valueSize: 1000},
	{name: "ycsb-e", mix: mix(0, 0, 0.05, 0.95, 0), dist: distScrambled, keys: userKeys, records: 100_000, valueSize: 1000},
	{name: "ycsb-f", mix: mix(0.5, 0, 0, 0, 0.5), dist: distScrambled, keys: userKeys, records: 100_000, valueSize: 1000},
	{name: "tx-5", mix: only(opTx), dist: distUniform, keys: decimalKeys, records: 100_000, valueSize: 128},
	{name: "sets-5", mix: only(opSets), dist: distUniform, keys: decimalKeys, records: 100_000, valueSize: 128},
}

func mix(read, update, insert, scan, rmw float64) [numOpKinds]float64 {
	return [numOpKinds]float64{read, update, insert, scan, rmw}
}

// only is the mix of one operation type.
func only(k opKind) [numOpKinds]float64 {
	var m [numOpKinds]float64
	m[k] = 1
	return m
}

// workloadNames lists the workloads for usage messages.
func workloadNames() string {
	names := make([]string, len(workloads))
	for i, w := range workloads {
		names[i] = w.name
	}
	return strings.Join(names, ", ")
}

func findWorkload(name string) (workload, error) {
	i := slices.IndexFunc(workloads, func(w workload) bool { return w.name == name })
	if i < 0 {
		return workload{}, fmt.Errorf("%w: unknown workload %q (want one of %s)", ErrConfig, name, workloadNames())
	}
	return workloads[i], nil
}

// kinds returns the operation types the workload generates.
func (w workload) kinds() []opKind {
	var ks []opKind
	for k := range numOpKinds {
		if w.mix[k] > 0 {
			ks = append(ks, k)
		}
	}
	return ks
}

// keyFormat turns key numbers into keys.
type keyFormat uint8

const (
	// decimalKeys are "0" .. "999999", as the cs6450 workload has them.
	decimalKeys keyFormat = iota
	// userKeys are YCSB's "user" followed by the key number zero-padded
	// to userDigits, so that byte order is numeric order and a RANGE from
	// a key reaches the next keys as a YCSB scan does.
	userKeys
)

const userDigits = 10

// lastKey is a key at or after every key of the format: the end of a scan.
func (f keyFormat) lastKey() string {
	if f == decimalKeys {
		return "9999999999"
	}
	return "user" + strings.Repeat("9", userDigits)
}

// key returns the key numbered n.
func (f keyFormat) key(n uint64) string {
	if f == decimalKeys {
		return strconv.FormatUint(n, 10)
	}
	var b [4 + userDigits]byte
	copy(b[:], "user")
	for i := len(b) - 1; i >= 4; i-- {
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[:])
}

// op is one generated operation: the key and, for writes, the value. The
// value aliases its generator's buffer and is valid until the next batch.
type op struct {
	kind    opKind
	key     string
	keys    []string // tx and sets: the txWrites keys written, key first
	value   []byte
	scanLen int // scans: the most pairs to return
}

// opGen generates one worker's operations. Its sequence depends only on
// the workload, the seed and the worker's index.
type opGen struct {
	rng     *rand.Rand
	cum     [numOpKinds]float64 // cumulative proportions
	keys    keyChooser
	ins     *insertSeq
	format  keyFormat
	scanMax int
	value   []byte // valueSize bytes plus valueSlack to vary writes
	nvalues uint64
	vsize   int
}

// valueSlack is how many different values a worker's writes cycle through.
const valueSlack = 64

// genParams are what opGens share: the workload as configured.
type genParams struct {
	w        workload
	records  int
	vsize    int
	scanMax  int
	seed     uint64
	workers  int
	choosers *chooserFactory
}

// newOpGen returns the generator of worker i: seeded with (seed, i), so
// each worker draws a different sequence.
func newOpGen(p genParams, i int) *opGen {
	g := &opGen{
		rng:     rand.New(rand.NewPCG(p.seed, uint64(i))),
		ins:     &insertSeq{records: p.records, worker: i, workers: p.workers},
		format:  p.w.keys,
		scanMax: p.scanMax,
		vsize:   p.vsize,
		value:   make([]byte, p.vsize+valueSlack),
	}
	g.keys = p.choosers.chooser(g.ins)
	sum := 0.0
	for k, f := range p.w.mix {
		sum += f
		g.cum[k] = sum
	}
	vr := rand.New(rand.NewPCG(p.seed^0x5eed, uint64(i))) // values do not perturb the ops
	for j := range g.value {
		g.value[j] = byte('a' + vr.IntN(26))
	}
	return g
}

// next returns the next operation.
func (g *opGen) next() op {
	k := g.kind()
	o := op{kind: k}
	var n uint64
	if k == opInsert {
		n = g.ins.insert()
	} else {
		n = g.keys.next(g.rng)
	}
	o.key = g.format.key(n)
	if k == opTx || k == opSets {
		o.keys = make([]string, txWrites)
		for i := range o.keys {
			o.keys[i] = g.format.key(n + uint64(i))
		}
	}
	switch k {
	case opUpdate, opInsert, opRMW, opTx, opSets:
		off := g.nvalues % valueSlack
		g.nvalues++
		o.value = g.value[off : off+uint64(g.vsize)]
	case opScan:
		o.scanLen = 1 + g.rng.IntN(g.scanMax) // YCSB: uniform in [1, maxscanlength]
	}
	return o
}

// kind draws an operation type from the mix, as YCSB's DiscreteGenerator.
func (g *opGen) kind() opKind {
	u := g.rng.Float64() * g.cum[numOpKinds-1]
	for k := range numOpKinds - 1 {
		if u < g.cum[k] {
			return k
		}
	}
	return numOpKinds - 1
}
