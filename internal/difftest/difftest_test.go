package difftest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flintkv/flint/internal/protocol"
)

// TestDifferential runs every testdata/*.script against redis-server and
// against a Flint server (startFlint), in RESP2 and RESP3, and fails on any
// reply that differs and is not listed in testdata/differences.txt, and on
// any listed difference that no longer differs.
func TestDifferential(t *testing.T) {
	scripts, listed := loadScripts(t)
	redis := startRedis(t)
	flint := startFlint(t)
	r := &run{listed: map[[2]string]bool{}, ran: map[string]int{}}
	for _, d := range listed {
		r.listed[[2]string{d.Script, d.Command}] = false
	}
	for _, sc := range scripts {
		for _, proto := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/resp%d", strings.TrimSuffix(sc.name, ".script"), proto), func(t *testing.T) {
				for _, c := range sc.cases {
					r.runCase(t, sc.name, proto, c, redis, flint)
				}
				r.ran[sc.name]++
			})
		}
	}
	for _, d := range listed {
		switch {
		case !exists("testdata/" + d.Script):
			t.Errorf("differences.txt:%d: no script %s", d.Line, d.Script)
		case r.ran[d.Script] == 2 && !r.listed[[2]string{d.Script, d.Command}]:
			t.Errorf("differences.txt:%d: %s: %s is listed as a difference but no longer differs "+
				"(or is no longer in the script): remove the entry", d.Line, d.Script, d.Command)
		}
	}
}

type script struct {
	name  string // file name in testdata
	cases []Case
}

// loadScripts parses testdata/*.script and testdata/differences.txt.
func loadScripts(t *testing.T) ([]script, []Difference) {
	data, err := os.ReadFile("testdata/differences.txt")
	if err != nil {
		t.Fatal(err)
	}
	listed, err := ParseDifferences(data)
	if err != nil {
		t.Fatal(err)
	}
	paths, err := filepath.Glob("testdata/*.script")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scripts in testdata (%v)", err)
	}
	var scripts []script
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := script{name: filepath.Base(path)}
		if sc.cases, err = ParseScript(sc.name, data); err != nil {
			t.Fatal(err)
		}
		scripts = append(scripts, sc)
	}
	return scripts, listed
}

// run is what TestDifferential has seen so far.
type run struct {
	listed map[[2]string]bool // script and command listed in differences.txt: seen to differ
	ran    map[string]int     // script: protocols it ran in
}

// runCase runs one case of script on new connections to both servers.
func (r *run) runCase(t *testing.T, script string, proto int, c Case, redis dialer, flintAddr string) {
	rc, fc := newConn(t, redis), newConn(t, tcp(flintAddr))
	defer rc.Close()
	defer fc.Close()
	for _, conn := range []*conn{rc, fc} {
		conn.setup(t, proto)
	}
	for i, s := range c.Steps {
		where := fmt.Sprintf("%s:%d (RESP%d): %s", script, s.Line, proto, s.Text)
		rv, rraw, rerr := rc.send(s.Bytes())
		fv, fraw, ferr := fc.send(s.Bytes())
		switch {
		case closed(rerr) && closed(ferr) && i == len(c.Steps)-1:
			return // both closed the connection, as the case expects
		case rerr != nil || ferr != nil:
			t.Errorf("%s: redis: %v; flint: %v (a connection that both servers close ends its case)", where, rerr, ferr)
			return
		}
		if bytes.Equal(rraw, fraw) || (s.Shape && SameShape(rv, fv)) {
			continue
		}
		key := [2]string{script, s.Text}
		if _, ok := r.listed[key]; ok {
			r.listed[key] = true
			continue
		}
		how := "differs"
		if s.Shape {
			how = "differs in shape"
		}
		t.Errorf("%s: reply %s and is not listed in testdata/differences.txt\n  redis: %q\n  flint: %q",
			where, how, clip(rraw), clip(fraw))
	}
}

// closed reports whether err means the server closed the connection.
func closed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// clip shortens a reply for a failure message.
func clip(b []byte) string {
	const most = 400
	if len(b) > most {
		return string(b[:most]) + "..."
	}
	return string(b)
}

// TestSameShape checks the comparison of !shape lines.
func TestSameShape(t *testing.T) {
	bulk := func(s string) protocol.Value { return protocol.Value{Kind: protocol.KindBulk, Str: []byte(s)} }
	arr := func(e ...protocol.Value) protocol.Value { return protocol.Value{Kind: protocol.KindArray, Elems: e} }
	num := protocol.Value{Kind: protocol.KindInt, Int: 7}
	for _, tc := range []struct {
		a, b protocol.Value
		want bool
	}{
		{bulk("redis"), bulk("flint"), true},
		{arr(bulk("1"), bulk("2")), arr(bulk("3"), bulk("4")), true},
		{bulk("1"), num, false},
		{arr(bulk("1")), arr(bulk("1"), bulk("2")), false},
		{arr(arr(num)), arr(arr(bulk("7"))), false},
		{arr(), protocol.Value{Kind: protocol.KindSet}, false},
	} {
		if got := SameShape(tc.a, tc.b); got != tc.want {
			t.Errorf("SameShape(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
