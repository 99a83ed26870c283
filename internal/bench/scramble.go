package bench

// YCSB's ScrambledZipfianGenerator draws from this many ranks and hashes
// the rank into the key space; scrambledZetan is zeta(scrambledItems, 0.99),
// YCSB's precomputed ZETAN.
const (
	scrambledItems = 10_000_000_000
	scrambledTheta = 0.99
	scrambledZetan = 26.46902820178302
)

// fnv64 is YCSB's Utils.fnvhash64: FNV-1a over the 8 bytes of v, low byte
// first, then the absolute value as a Java long (whose absolute value of
// the most negative number stays negative; as unsigned it is 2^63).
func fnv64(v uint64) uint64 {
	const offset, prime = 0xCBF29CE484222325, 1099511628211
	h := uint64(offset)
	for range 8 {
		h ^= v & 0xff
		h *= prime
		v >>= 8
	}
	if int64(h) < 0 {
		h = -h
	}
	return h
}
