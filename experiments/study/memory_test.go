package study

import (
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
