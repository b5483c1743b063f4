package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// certReloader holds the public listener's certificate and swaps it on
// reload: handshakes read it through tls.Config.GetCertificate, so a new
// certificate (a renewal written over the old files, then SIGHUP) is served
// from the next handshake on, without a restart and without touching open
// connections. A reload that fails (a half-written file, a key that does
// not match, a certificate expired or not yet valid) keeps the certificate
// in use.
type certReloader struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
	now               func() time.Time // the clock validity is judged by; nil = time.Now

	expiry  prometheus.Gauge
	reloads *prometheus.CounterVec
}

// loadCerts reads the key pair; an error says what is wrong with the
// files, so that chatd refuses to start with them.
func loadCerts(certFile, keyFile string) (*certReloader, error) {
	r := &certReloader{
		certFile: certFile, keyFile: keyFile,
		expiry: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chatd_tls_cert_expiry_timestamp_seconds",
			Help: "When the certificate the public listener serves expires (Unix time); alert well before.",
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatd_tls_cert_reloads_total",
			Help: "Certificate reloads on SIGHUP by result (ok; error: refused — unreadable, a key that does not match, expired or not yet valid — and the previous certificate stays).",
		}, []string{"result"}),
	}
	cert, err := readKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	r.set(cert)
	return r, nil
}

// readKeyPair loads and checks a PEM certificate chain and its key.
func readKeyPair(certFile, keyFile string) (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s / --tls-key %s: %v", certFile, keyFile, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("--tls-cert %s: %v", certFile, err)
		}
	}
	return &cert, nil
}

func (r *certReloader) set(cert *tls.Certificate) {
	r.cert.Store(cert)
	r.expiry.Set(float64(cert.Leaf.NotAfter.Unix()))
}

// reload reads the files again and swaps the pair in if it is valid now:
// a pair that does not load (a half-written file, a key that does not
// match), or whose certificate has expired or is not yet valid, is refused
// with an error saying why, counted (result "error"), and the current
// certificate stays.
func (r *certReloader) reload() (*x509.Certificate, error) {
	cert, err := readKeyPair(r.certFile, r.keyFile)
	if err == nil {
		err = r.valid(cert.Leaf)
	}
	if err != nil {
		r.reloads.WithLabelValues("error").Inc()
		return nil, err
	}
	r.set(cert)
	r.reloads.WithLabelValues("ok").Inc()
	return cert.Leaf, nil
}

// valid refuses a certificate outside its validity window at the clock's
// now: clients would refuse it at every handshake.
func (r *certReloader) valid(c *x509.Certificate) error {
	now := time.Now
	if r.now != nil {
		now = r.now
	}
	t := now()
	switch {
	case t.After(c.NotAfter):
		return fmt.Errorf("--tls-cert %s: the certificate expired at %s", r.certFile, c.NotAfter.UTC().Format(time.RFC3339))
	case t.Before(c.NotBefore):
		return fmt.Errorf("--tls-cert %s: the certificate is not valid before %s", r.certFile, c.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}

// leaf is the certificate served now.
func (r *certReloader) leaf() *x509.Certificate { return r.cert.Load().Leaf }

// config is the public listener's TLS configuration: TLS 1.2 or newer,
// HTTP/1.1 (the WebSocket upgrade is an HTTP/1.1 request), the current
// certificate at each handshake.
func (r *certReloader) config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := r.cert.Load(); c != nil {
				return c, nil
			}
			return nil, errors.New("no certificate loaded")
		},
	}
}

// describe is a log line's view of a certificate.
func describe(c *x509.Certificate) []any {
	return []any{"subject", c.Subject.String(), "dns", c.DNSNames, "not_after", c.NotAfter.UTC().Format(time.RFC3339), "serial", c.SerialNumber.String()}
}

// collectors are the certificate's metrics.
func (r *certReloader) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.expiry, r.reloads}
}
