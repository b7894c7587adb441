package access

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// TLSFiles is a server certificate and key, and optionally the CA that
// client certificates must be signed by (mTLS).
type TLSFiles struct {
	CertFile, KeyFile string
	ClientCAFile      string
}

// ServerTLS serves a certificate that Reload can replace while the server
// runs: new handshakes use the new files, established connections keep
// theirs.
type ServerTLS struct {
	files TLSFiles
	mu    sync.Mutex
	conf  atomic.Pointer[tls.Config]
}

// NewServerTLS loads the files.
func NewServerTLS(files TLSFiles) (*ServerTLS, error) {
	s := &ServerTLS{files: files}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload re-reads the certificate, key and client CA. On an error the
// previous ones stay in force.
func (s *ServerTLS) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cert, err := tls.LoadX509KeyPair(s.files.CertFile, s.files.KeyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate %s / key %s: %w", s.files.CertFile, s.files.KeyFile, err)
	}
	conf := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2"},
	}
	if s.files.ClientCAFile != "" {
		pem, err := os.ReadFile(s.files.ClientCAFile)
		if err != nil {
			return fmt.Errorf("TLS client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("TLS client CA %s: no PEM certificate in it", s.files.ClientCAFile)
		}
		conf.ClientCAs = pool
		conf.ClientAuth = tls.RequireAndVerifyClientCert
	}
	s.conf.Store(conf)
	return nil
}

// Config is the tls.Config to give the server: each handshake takes the
// files loaded last.
func (s *ServerTLS) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.conf.Load(), nil
		},
	}
}
