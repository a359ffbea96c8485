package study

import (
	"runtime"
	"testing"
	"time"
)

func TestMemorySampler(t *testing.T) {
	s := startMemSampler(time.Millisecond)
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	time.Sleep(5 * time.Millisecond)
	m := s.Stop()
	if m.PeakHeap < 64<<20 {
		t.Errorf("peak heap %d < 64 MiB after allocating 64 MiB", m.PeakHeap)
	}
	if _, ok := ProcStatus("VmRSS"); ok && m.PeakRSS < 64<<20 {
		t.Errorf("peak RSS %d (%s) < 64 MiB after touching 64 MiB", m.PeakRSS, m.RSSSource)
	}
	_ = buf[len(buf)-1]
}

// TestMemoryBase checks that memory live before the measurement counts in
// the base, not in what the section added.
func TestMemoryBase(t *testing.T) {
	before := make([]byte, 48<<20)
	for i := range before {
		before[i] = byte(i)
	}
	m := MeasureMemory(func() {
		buf := make([]byte, 16<<20)
		for i := range buf {
			buf[i] = byte(i)
		}
		time.Sleep(5 * time.Millisecond)
		runtime.KeepAlive(buf)
	})
	if m.BaseHeap < 48<<20 {
		t.Errorf("base heap %d < 48 MiB live before the section", m.BaseHeap)
	}
	if a := m.AddedHeap(); a < 16<<20 || a > 40<<20 {
		t.Errorf("added heap %d MiB, want about 16 MiB (base %d, peak %d)", a>>20, m.BaseHeap>>20, m.PeakHeap>>20)
	}
	runtime.KeepAlive(before)
}
