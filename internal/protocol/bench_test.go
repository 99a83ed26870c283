package protocol

import (
	"bufio"
	"bytes"
	"fmt"
	"testing"
)

// BenchmarkParser parses a pipeline of 100 commands, GET and SET alternating
// with 16-byte keys and 64-byte values, as a server reads them from one
// connection. b.SetBytes makes the result a throughput.
func BenchmarkParser(b *testing.B) {
	var pipeline []byte
	val := bytes.Repeat([]byte("v"), 64)
	for i := range 100 {
		key := fmt.Appendf(nil, "key:%012d", i)
		if i%2 == 0 {
			pipeline = AppendCommand(pipeline, []byte("GET"), key)
		} else {
			pipeline = AppendCommand(pipeline, []byte("SET"), key, val)
		}
	}
	p := NewParser(DefaultLimits)
	args := make([][]byte, 0, 8)
	b.SetBytes(int64(len(pipeline)))
	b.ReportAllocs()
	for b.Loop() {
		buf := pipeline
		for len(buf) > 0 {
			var n int
			var err error
			args, n, err = p.Next(buf, args)
			if err != nil {
				b.Fatal(err)
			}
			buf = buf[n:]
		}
	}
}

// BenchmarkReader decodes a stream of replies as a client does: an array of
// 10 bulk strings, then a simple string and an integer.
func BenchmarkReader(b *testing.B) {
	var reply []byte
	reply = AppendArray(reply, 10)
	for range 10 {
		reply = AppendBulk(reply, bytes.Repeat([]byte("v"), 64))
	}
	reply = AppendOK(reply)
	reply = AppendInt(reply, 12345)
	r := bytes.NewReader(reply)
	br := bufio.NewReader(r)
	rd := NewReader(br, DefaultReaderLimits)
	b.SetBytes(int64(len(reply)))
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(reply)
		br.Reset(r)
		for range 3 {
			if _, err := rd.Read(); err != nil {
				b.Fatal(err)
			}
		}
	}
}
