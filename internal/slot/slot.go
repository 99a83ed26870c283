// Package slot maps keys to Redis Cluster's 16384 hash slots: slot =
// CRC16(key) mod 16384, where CRC16 is CRC-16/XMODEM (polynomial 0x1021,
// no reflection, initial value 0), and where a key that holds a hash tag,
// a non-empty "{...}" (the first "{" and the first "}" after it), is hashed
// by the tag alone, so that keys sharing a tag share a slot.
package slot

// Count is the number of hash slots.
const Count = 16384

// table is CRC-16/XMODEM's byte table.
var table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// CRC16 returns the CRC-16/XMODEM of b.
func CRC16(b []byte) uint16 {
	var crc uint16
	for _, x := range b {
		crc = crc<<8 ^ table[byte(crc>>8)^x]
	}
	return crc
}

// Of returns key's slot.
func Of(key []byte) int {
	return int(CRC16(tag(key)) % Count)
}

// tag returns the part of key that is hashed: its hash tag, if it has a
// non-empty one, else the whole key.
func tag(key []byte) []byte {
	for i, c := range key {
		if c != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j == i+1 {
					return key // "{}": no tag
				}
				return key[i+1 : j]
			}
		}
		return key
	}
	return key
}
