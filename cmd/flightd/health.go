package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/tileflight/tileflight/storage"
)

// The metrics port also answers the probes orchestrators and load
// balancers send over HTTP (gRPC health is on the Flight port):
//
//	/healthz  200 while the process serves HTTP at all (liveness)
//	/readyz   200 when the data is reachable: the data directory, or on
//	          S3 the bucket, answers a listing within readyTimeout; 503
//	          with the error otherwise (readiness)

// readyTimeout bounds one readiness check, below the usual probe timeouts.
const readyTimeout = 3 * time.Second

func healthzHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintln(w, "ok")
	})
}

func readyzHandler(ready func(context.Context) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
			defer cancel()
			if err := ready(ctx); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "not ready: %v\n", err)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
}

// storeReady checks that st answers: a listing of its root (on S3 a
// ListObjectsV2 of the prefix, which fails while the bucket does not
// answer or does not exist).
func storeReady(st storage.Store) func(context.Context) error {
	return func(ctx context.Context) error {
		if _, err := st.List(ctx, ""); err != nil {
			return fmt.Errorf("data unreachable: %w", err)
		}
		return nil
	}
}
