package server

import (
	"runtime/metrics"
	"testing"
)

// TestMemoryMetricsExist checks that this Go has every runtime metric INFO
// memory reports, as an integer: sampleUint would read a missing one as 0.
func TestMemoryMetricsExist(t *testing.T) {
	kinds := map[string]metrics.ValueKind{}
	for _, d := range metrics.All() {
		kinds[d.Name] = d.Kind
	}
	for _, name := range memoryMetrics {
		if kinds[name] != metrics.KindUint64 {
			t.Errorf("runtime metric %s: kind %v, want KindUint64", name, kinds[name])
		}
	}
}
