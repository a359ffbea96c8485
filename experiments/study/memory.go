package study

import (
	"bufio"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Memory is the peak memory of a measured section.
type Memory struct {
	// PeakHeap is the largest Go heap in use (runtime.MemStats.HeapAlloc)
	// seen by the sampler, in bytes.
	PeakHeap uint64
	// PeakRSS is the peak resident set size of the process, in bytes: VmHWM
	// of /proc/self/status after resetting it through /proc/self/clear_refs
	// when Linux allows it (RSSSource "VmHWM"), else the largest sampled
	// VmRSS (RSSSource "VmRSS sampled"); 0 and "" where /proc is missing.
	PeakRSS   uint64
	RSSSource string
	// BaseHeap and BaseRSS are the Go heap in use and the RSS when the
	// measurement started (after a collection): what was live before the
	// section (the model, the text, the rest of the process). PeakHeap −
	// BaseHeap is what the section itself added.
	BaseHeap, BaseRSS uint64
}

// AddedHeap is PeakHeap − BaseHeap (0 if the base is not below the peak).
func (m Memory) AddedHeap() uint64 { return m.PeakHeap - min(m.BaseHeap, m.PeakHeap) }

// AddedRSS is PeakRSS − BaseRSS (0 if the base is not below the peak).
func (m Memory) AddedRSS() uint64 { return m.PeakRSS - min(m.BaseRSS, m.PeakRSS) }

// MeasureMemory runs f with the garbage collector set to GOGC=10, so that
// the Go heap stays within about 10% of the live memory, and returns the
// peaks seen by a sampler running every 2 ms (see Memory).
func MeasureMemory(f func()) Memory {
	old := debug.SetGCPercent(10)
	defer debug.SetGCPercent(old)
	s := startMemSampler(2 * time.Millisecond)
	f()
	return s.Stop()
}

// memSampler samples the Go heap and the process RSS every interval from
// start to stop. Starting it frees what can be freed (debug.FreeOSMemory),
// so the peak belongs to the measured section and what it keeps alive.
type memSampler struct {
	stop     chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	m        Memory
	hwmReset bool
}

func startMemSampler(interval time.Duration) *memSampler {
	runtime.GC() // two collections empty the sync.Pool caches too
	debug.FreeOSMemory()
	s := &memSampler{stop: make(chan struct{})}
	// Writing 5 to clear_refs resets the peak RSS (VmHWM) to the current
	// RSS (Linux >= 4.0).
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err == nil {
		s.hwmReset = true
	}
	s.sample()
	s.m.BaseHeap, s.m.BaseRSS = s.m.PeakHeap, s.m.PeakRSS
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *memSampler) sample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, _ := ProcStatus("VmRSS")
	s.mu.Lock()
	s.m.PeakHeap = max(s.m.PeakHeap, ms.HeapAlloc)
	s.m.PeakRSS = max(s.m.PeakRSS, rss)
	s.mu.Unlock()
}

// Stop ends the sampling and returns the peaks.
func (s *memSampler) Stop() Memory {
	s.sample()
	close(s.stop)
	s.wg.Wait()
	m := s.m
	m.RSSSource = "VmRSS sampled"
	if s.hwmReset {
		if hwm, ok := ProcStatus("VmHWM"); ok {
			m.PeakRSS = max(m.PeakRSS, hwm)
			m.RSSSource = "VmHWM"
		}
	}
	if m.PeakRSS == 0 {
		m.RSSSource = ""
	}
	return m
}

// ProcStatus reads a "kB" field of /proc/self/status (VmRSS, VmHWM, ...)
// in bytes; false where /proc is missing or the field is absent.
func ProcStatus(field string) (uint64, bool) { return ProcStatusOf("self", field) }

// ProcStatusOf is ProcStatus of /proc/<pid>/status, pid a process id or
// "self" (false also when the process has ended).
func ProcStatusOf(pid, field string) (uint64, bool) {
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != field {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			return 0, false
		}
		n, err := strconv.ParseUint(fs[0], 10, 64)
		if err != nil {
			return 0, false
		}
		if len(fs) > 1 && strings.EqualFold(fs[1], "kB") {
			n *= 1024
		}
		return n, true
	}
	return 0, false
}
