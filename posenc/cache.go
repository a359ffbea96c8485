package posenc

import "sync"

// tableCache is the one cache of host-side tables (sinusoid tables, ALiBi
// biases, bucket and gather indices, rotary tables) that every encoding
// keeps, keyed by whatever determines the table (span, sizes, dtype, the
// encoding's own settings). It is guarded by a mutex, so one encoding may
// build graphs from several goroutines at once, and its zero value is an
// empty cache ready to use, so a zero-value encoding (&Sinusoidal{},
// &Alibi{}) needs no constructor. A tableCache must not be copied after
// first use (it holds a mutex).
//
// Tables are built under the lock, so two goroutines asking for the same
// missing key build it once; a build error is returned and not cached.
// Cached values are shared by every graph and must not be modified.
type tableCache[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]V
}

// get returns the value of key, calling build to create it if it is not
// cached yet.
func (c *tableCache[K, V]) get(key K, build func() (V, error)) (V, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m[key]; ok {
		return v, nil
	}
	v, err := build()
	if err != nil {
		var zero V
		return zero, err
	}
	if c.m == nil {
		c.m = map[K]V{}
	}
	c.m[key] = v
	return v, nil
}

// len returns the number of cached tables.
func (c *tableCache[K, V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
