package frame

import "hash/crc32"

// crcIndex gives the CRC-32C of any range of b in time logarithmic in its
// length, after one pass over b. Finder uses it so that checking candidate
// frames with large lengths at every offset of a damaged file costs
// O(len(b)) in all, not O(len(b)²).
//
// It rests on the linearity of CRCs (as zlib's crc32_combine does): for
// byte strings A and B, crc(A‖B) = shift(crc(A), len(B)) ⊕ crc(B), where
// shift multiplies by x^(8·len(B)) modulo the polynomial. So with prefix
// CRCs P(k) = crc(b[:k]), crc(b[s:e]) = P(e) ⊕ shift(P(s), e−s).
type crcIndex struct {
	b      []byte
	prefix []uint32 // prefix[i] is the CRC-32C of b[:i*indexStride]
}

// indexStride is how many bytes of b each prefix CRC stands for: the index
// takes a sixteenth of len(b) in memory.
const indexStride = 64

func newCRCIndex(b []byte) *crcIndex {
	x := &crcIndex{b: b, prefix: make([]uint32, len(b)/indexStride+1)}
	var c uint32
	for i := 0; i+indexStride <= len(b); i += indexStride {
		c = crc32.Update(c, castagnoli, b[i:i+indexStride])
		x.prefix[i/indexStride+1] = c
	}
	return x
}

// crcAt returns the CRC-32C of b[:k].
func (x *crcIndex) crcAt(k int) uint32 {
	i := k / indexStride
	return crc32.Update(x.prefix[i], castagnoli, x.b[i*indexStride:k])
}

// frameCRC returns the checksum a frame at off with len n would have: the
// CRC-32C of its four len bytes followed by the n bytes after its header.
func (x *crcIndex) frameCRC(off, n int) uint32 {
	s, e := off+HeaderSize, off+HeaderSize+n
	head := crc32.Update(0, castagnoli, x.b[off:off+4])
	// crc(head‖body) = shift(head, n) ⊕ crc(body)
	//                = shift(head, n) ⊕ P(e) ⊕ shift(P(s), n)
	return x.crcAt(e) ^ shift(head^x.crcAt(s), n)
}

// castagnoliReversed is the CRC-32C polynomial in the bit order that
// hash/crc32 uses.
const castagnoliReversed = 0x82f63b78

// mulModP multiplies a and b, polynomials in that bit order, modulo the
// CRC-32C polynomial.
func mulModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReversed
		} else {
			b >>= 1
		}
	}
	return p
}

// x2n[k] is x^(2^k) modulo the polynomial, for every k that shift needs
// for a length below 2^60.
var x2n = func() (t [64]uint32) {
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = mulModP(p, p)
	}
	return t
}()

// shift returns crc multiplied by x^(8n): the CRC state after n more zero
// bytes, less what the zeros contribute (see crcIndex).
func shift(crc uint32, n int) uint32 {
	p := uint32(1) << 31                   // x^0
	for k := 3; n != 0; n, k = n>>1, k+1 { // 8n = n·2^3
		if n&1 != 0 {
			p = mulModP(x2n[k], p)
		}
	}
	return mulModP(p, crc)
}
