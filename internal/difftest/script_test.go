package difftest

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseScript(t *testing.T) {
	script := `# a comment
SET k "a b"
  GET k

# another comment

!shape TIME
# comment inside a case
PING
!inline SET k a"b
`
	cases, err := ParseScript("x.script", []byte(script))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cases {
		var steps []string
		for _, s := range c.Steps {
			steps = append(steps, fmt.Sprintf("%d %s %q %v", s.Line, s.Text, s.Args, s.Shape))
			if s.Inline != (s.Args == nil) {
				t.Errorf("line %d: Inline %v with arguments %q", s.Line, s.Inline, s.Args)
			}
		}
		got = append(got, fmt.Sprintf("case at %d: %s", c.Line, strings.Join(steps, "; ")))
	}
	want := []string{
		`case at 2: 2 SET k "a b" ["SET" "k" "a b"] false; 3 GET k ["GET" "k"] false`,
		`case at 7: 7 TIME ["TIME"] true; 9 PING ["PING"] false; 10 SET k a"b [] false`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, bad := range []string{"SET k \"open", "!nosuch PING", "!shape", "!shape \"\x00"} {
		if _, err := ParseScript("x.script", []byte("PING\n"+bad+"\n")); err == nil || !strings.Contains(err.Error(), "x.script:2: ") {
			t.Errorf("ParseScript(%q): error %v, want one at x.script:2", bad, err)
		}
	}
}

func TestParseDifferences(t *testing.T) {
	list, err := ParseDifferences([]byte(`# comment
a.script: SELECT 1
	one database:
	  no more

b.script: LPUSH k v
b.script: SADD k v
	only strings
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range list {
		got = append(got, fmt.Sprintf("%d %s|%s|%s", d.Line, d.Script, d.Command, d.Reason))
	}
	want := "2 a.script|SELECT 1|one database: no more\n6 b.script|LPUSH k v|only strings\n7 b.script|SADD k v|only strings"
	if strings.Join(got, "\n") != want {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), want)
	}
	for _, bad := range []string{
		"\treason first\n",
		"a.script: X\n",
		"a.script: X\n\tr\na.script: Y\n",
		"a.script: X\n\tr\na.script: X\n\tr\n",
		"no colon\n\tr\n",
	} {
		if _, err := ParseDifferences([]byte(bad)); err == nil {
			t.Errorf("ParseDifferences(%q) = nil error", bad)
		}
	}
}
