package tileio

import "sync/atomic"

// Meter counts the decoded bytes one read holds under its memory budget:
// tiles, and the result a read builds from them and charges with
// Loader.Hold (a dense read's chunks). Its peak is what tests check a
// read's memory against. A nil *Meter counts nothing; it is safe for
// concurrent use.
type Meter struct {
	held, peak atomic.Int64
}

func (m *Meter) add(n int64) {
	if m == nil || n == 0 {
		return
	}
	v := m.held.Add(n)
	for {
		old := m.peak.Load()
		if v <= old || m.peak.CompareAndSwap(old, v) {
			return
		}
	}
}

// Held is the bytes held now.
func (m *Meter) Held() int64 {
	if m == nil {
		return 0
	}
	return m.held.Load()
}

// Peak is the most bytes held at once.
func (m *Meter) Peak() int64 {
	if m == nil {
		return 0
	}
	return m.peak.Load()
}
