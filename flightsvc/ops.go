package flightsvc

import (
	"github.com/tileflight/tileflight/metrics"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/transport"
)

// Gauges are the service's values that the daemon's metrics read at
// scrape time: the metadata cache, the memory budget in use and the
// stream slots.
func (s *Service) Gauges() metrics.Gauges {
	return metrics.Gauges{
		CacheHits:      func() uint64 { h, _ := s.cache.Stats(); return h },
		CacheMisses:    func() uint64 { _, m := s.cache.Stats(); return m },
		CacheEntries:   s.cache.Len,
		BudgetInUse:    reader.MemoryInUse,
		StreamsRunning: func() int { return len(s.streams) },
		StreamsLimit:   func() int { return cap(s.streams) },
		ZstdSent:       func() uint64 { z, _ := transport.ZstdSent(); return z },
		ZstdSentRaw:    func() uint64 { _, r := transport.ZstdSent(); return r },
		TileCacheHits:  func() uint64 { return uint64(s.tiles.Stats().Hits) },
		TileCacheMiss:  func() uint64 { return uint64(s.tiles.Stats().Misses) },
		TileCacheBytes: func() int64 { return s.tiles.Stats().Bytes },
	}
}
