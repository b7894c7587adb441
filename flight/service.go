package flight

import (
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/rs/zerolog"

	"github.com/tileflight/tileflight/storage"
)

// Config is what the service needs from the daemon.
type Config struct {
	// Store holds the arrays (the data directory).
	Store storage.Store
	// Log receives the service's own messages (the access log is separate).
	Log zerolog.Logger
	// MemoryBudget bounds the decoded bytes one query may hold at once.
	MemoryBudget int64
}

// Service implements the Flight RPCs. RPCs that are not built yet answer
// Unimplemented (from the embedded base server).
type Service struct {
	aflight.BaseFlightServer
	cfg Config
}

// NewService returns a Flight service over cfg.Store.
func NewService(cfg Config) *Service {
	return &Service{cfg: cfg}
}
