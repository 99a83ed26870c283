package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// The files written into --out.
const (
	resultFile = "result.json" // the Result; see the package documentation
	benchFile  = "bench.txt"   // the benchmark lines, for benchstat
)

// writeFiles writes the result, the benchmark lines and the plots into
// cfg.Out, creating it if needed. Nothing is written without --out.
func (s *session) writeFiles(res *Result) error {
	dir := s.cfg.Out
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: encoding the result: %w", err)
	}
	var lines bytes.Buffer
	s.printBenchLines(&lines, res)
	for name, data := range map[string][]byte{resultFile: append(js, '\n'), benchFile: lines.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	return s.writePlots(dir, res)
}
