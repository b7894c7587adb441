package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/tileflight/tileflight/access"
)

// reloadOnHangup re-reads the credentials (tokens file, JWT keys) and the
// TLS certificate, key and client CA on each SIGHUP, without dropping a
// connection: a removed token is refused from its next call, new TLS
// handshakes take the new certificate. A file that fails to load leaves
// the old set in force, and the log says why. The returned func stops it.
func reloadOnHangup(auth *access.Authenticator, tls *access.ServerTLS, log zerolog.Logger) func() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-hup:
			}
			ok := true
			if err := auth.Reload(); err != nil {
				ok = false
				log.Error().Err(err).Msg("SIGHUP: credentials not reloaded; the previous set stays in force")
			}
			if tls != nil {
				if err := tls.Reload(); err != nil {
					ok = false
					log.Error().Err(err).Msg("SIGHUP: TLS files not reloaded; the previous certificate stays in force")
				}
			}
			if ok {
				log.Info().Int("tokens", auth.TokenCount()).Bool("tls", tls != nil).Msg("SIGHUP: credentials and TLS files reloaded")
			}
		}
	}()
	return func() { signal.Stop(hup); close(done) }
}
