package procstat

import (
	"errors"
	"testing"
)

// statLine builds a /proc/PID/stat line for comm with utime 1200, stime 34
// and starttime 98765.
func statLine(comm string) string {
	return "4242 (" + comm + ") S 1 4242 4242 0 -1 4194560 1521 0 0 0 1200 34 0 0 20 0 8 0 98765 " +
		"1262678016 5421 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
}

func TestParseStat(t *testing.T) {
	want := procStat{state: 'S', cpuTicks: 1234, startTime: 98765}
	for _, tc := range []struct {
		name, in string
		want     procStat
		wantErr  bool
	}{
		{name: "plain", in: statLine("flint"), want: want},
		{name: "spaces", in: statLine("flint bench x"), want: want},
		{name: "parens", in: statLine("a) S 1 2 (b"), want: want},
		{name: "empty comm", in: statLine(""), want: want},
		{name: "zombie", in: "7 (x) Z 1 7 7 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 77 0 0",
			want: procStat{state: 'Z', cpuTicks: 11, startTime: 77}},
		{name: "no paren", in: "4242 flint S 1", wantErr: true},
		{name: "truncated", in: "4242 (flint) S 1 4242 4242 0 -1 4194560 1521 0 0 0 1200", wantErr: true},
		{name: "not a number", in: "7 (x) R 1 7 7 0 -1 0 0 0 0 0 5 x 0 0 20 0 1 0 77 0 0", wantErr: true},
		{name: "empty", in: "", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStat([]byte(tc.in))
			checkErr(t, err, tc.wantErr)
			if got != tc.want {
				t.Errorf("parseStat = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseStatm(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    uint64
		wantErr bool
	}{
		{in: "308250 5421 2830 512 0 35671 0\n", want: 5421},
		{in: "0 0 0 0 0 0 0\n", want: 0}, // a zombie
		{in: "308250\n", wantErr: true},
		{in: "308250 -1 2830\n", wantErr: true},
		{in: "", wantErr: true},
	} {
		got, err := parseStatm([]byte(tc.in))
		checkErr(t, err, tc.wantErr)
		if got != tc.want {
			t.Errorf("parseStatm(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

const netDev = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
  eth0: 1111 2 0 0 0 0 0 0 2222 3 0 0 0 0 0 0
    lo: 27896631999 39217185    0    0    0     0          0         0 27896632000 39217185    0    0    0     0       0          0
`

func TestParseNetDev(t *testing.T) {
	for _, tc := range []struct {
		name, in, iface string
		rx, tx          uint64
		wantErr         bool
	}{
		{name: "lo", in: netDev, iface: "lo", rx: 27896631999, tx: 27896632000},
		{name: "eth0", in: netDev, iface: "eth0", rx: 1111, tx: 2222},
		{name: "touching colon", in: "lo:123 1 0 0 0 0 0 0 456 1 0 0 0 0 0 0\n", iface: "lo", rx: 123, tx: 456},
		{name: "missing", in: netDev, iface: "wlan0", wantErr: true},
		{name: "prefix is not a match", in: "  lo0: 1 1 0 0 0 0 0 0 2 1 0 0 0 0 0 0\n", iface: "lo", wantErr: true},
		{name: "short", in: "lo: 1 2 3\n", iface: "lo", wantErr: true},
		{name: "garbage", in: "lo: a 1 0 0 0 0 0 0 2 1 0 0 0 0 0 0\n", iface: "lo", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rx, tx, err := parseNetDev([]byte(tc.in), tc.iface)
			checkErr(t, err, tc.wantErr)
			if rx != tc.rx || tx != tc.tx {
				t.Errorf("parseNetDev = %d, %d, want %d, %d", rx, tx, tc.rx, tc.tx)
			}
		})
	}
}

func TestParseCPU(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     cpuTimes
		wantErr  bool
	}{
		{
			// guest (9) and guest_nice (10) are inside user and nice.
			name: "modern",
			in: "cpu  100 2 30 500 7 1 3 4 9 10\ncpu0 50 1 15 250 3 0 1 2 0 0\ncpu1 50 1 15 250 4 1 2 2 0 0\n" +
				"intr 1 2 3\nctxt 99\n",
			want: cpuTimes{busy: 100 + 2 + 30 + 1 + 3 + 4, total: 647, cores: 2},
		},
		{name: "four columns", in: "cpu 10 0 5 85\ncpu0 10 0 5 85\n", want: cpuTimes{busy: 15, total: 100, cores: 1}},
		{name: "no cpu line", in: "cpu0 10 0 5 85\n", wantErr: true},
		{name: "short cpu line", in: "cpu 10 0 5\n", wantErr: true},
		{name: "garbage", in: "cpu 10 x 5 85\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCPU([]byte(tc.in))
			checkErr(t, err, tc.wantErr)
			if got != tc.want {
				t.Errorf("parseCPU = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func checkErr(t *testing.T, err error, wantErr bool) {
	t.Helper()
	switch {
	case wantErr && !errors.Is(err, ErrParse):
		t.Errorf("error = %v, want one wrapping ErrParse", err)
	case !wantErr && err != nil:
		t.Errorf("unexpected error: %v", err)
	}
}
