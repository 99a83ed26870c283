package difftest

import (
	"bufio"
	"bytes"
	"fmt"
	"iter"
	"math"
	"strings"

	"github.com/flintkv/flint/internal/protocol"
)

// A Case is a run of commands that starts on new connections to emptied
// servers.
type Case struct {
	Line  int // where it starts in its script, from 1
	Steps []Step
}

// A Step is one command of a case.
type Step struct {
	Line   int    // in its script, from 1
	Text   string // the command line as written, without its directive
	Args   [][]byte
	Shape  bool // compare only the replies' shapes
	Inline bool // send Text as an inline command; Args is nil
}

// The directives that may start a line.
const (
	shapePrefix  = "!shape "
	inlinePrefix = "!inline "
)

// Bytes returns the command as it is sent: an inline command, or a RESP
// array of bulk strings.
func (s Step) Bytes() []byte {
	if s.Inline {
		return []byte(s.Text + "\r\n")
	}
	return protocol.AppendCommand(nil, s.Args...)
}

// ParseScript reads the cases of a script; name is used in errors. A line
// that cannot be split into arguments, or that starts with "!" but with
// no directive, is an error.
func ParseScript(name string, data []byte) ([]Case, error) {
	var cases []Case
	var cur *Case
	for n, line := range lines(data) {
		text := strings.TrimSpace(line)
		switch {
		case text == "":
			cur = nil
			continue
		case text[0] == '#':
			continue
		}
		step, err := parseStep(n, text)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, n, err)
		}
		if cur == nil {
			cases = append(cases, Case{Line: n})
			cur = &cases[len(cases)-1]
		}
		cur.Steps = append(cur.Steps, step)
	}
	return cases, nil
}

// parseStep parses the command line text, at line n.
func parseStep(n int, text string) (Step, error) {
	step := Step{Line: n, Text: text}
	if rest, ok := strings.CutPrefix(text, inlinePrefix); ok {
		step.Text, step.Inline = strings.TrimSpace(rest), true
		return step, nil // the server splits it
	}
	if rest, ok := strings.CutPrefix(text, shapePrefix); ok {
		step.Text, step.Shape = strings.TrimSpace(rest), true
	} else if text[0] == '!' {
		return step, fmt.Errorf("unknown directive in %q (%q and %q are known)", text, shapePrefix, inlinePrefix)
	}
	args, err := protocol.SplitArgs([]byte(step.Text), nil, math.MaxInt)
	if err != nil || len(args) == 0 {
		return step, fmt.Errorf("cannot split %q into arguments: %v", step.Text, err)
	}
	step.Args = args
	return step, nil
}

// A Difference is an entry of differences.txt: a command of a script whose
// reply differs from Redis's on purpose.
type Difference struct {
	Script  string // the script's file name
	Command string // the command line as written in the script
	Reason  string
	Line    int // of the entry in differences.txt
}

// ParseDifferences reads differences.txt: entries "<script>: <command>",
// each group of consecutive entries followed by the indented lines of
// their reason. Comments and blank lines are skipped. An entry without a
// reason, or one listed twice, is an error.
func ParseDifferences(data []byte) ([]Difference, error) {
	var list []Difference
	group := 0 // the first entry that the reason lines being read belong to
	seen := map[[2]string]int{}
	for n, line := range lines(data) {
		text := strings.TrimSpace(line)
		switch {
		case text == "" || text[0] == '#':
			continue
		case line[0] == ' ' || line[0] == '\t':
			if group == len(list) {
				return nil, fmt.Errorf("differences.txt:%d: a reason with no entry before it", n)
			}
			for i := group; i < len(list); i++ {
				list[i].Reason = strings.TrimSpace(list[i].Reason + " " + text)
			}
			continue
		}
		if group < len(list) && list[len(list)-1].Reason != "" {
			group = len(list) // the reason of the group before is complete
		}
		script, cmd, ok := strings.Cut(text, ": ")
		if !ok {
			return nil, fmt.Errorf("differences.txt:%d: want \"<script>: <command>\", got %q", n, text)
		}
		key := [2]string{script, strings.TrimSpace(cmd)}
		if first, dup := seen[key]; dup {
			return nil, fmt.Errorf("differences.txt:%d: %q is listed already at line %d", n, text, first)
		}
		seen[key] = n
		list = append(list, Difference{Script: key[0], Command: key[1], Line: n})
	}
	for _, d := range list {
		if d.Reason == "" {
			return nil, fmt.Errorf("differences.txt:%d: %s: %s has no reason", d.Line, d.Script, d.Command)
		}
	}
	return list, nil
}

// lines yields data's lines in order, with their numbers from 1.
func lines(data []byte) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for n := 1; sc.Scan() && yield(n, sc.Text()); n++ {
		}
	}
}
