package service

import (
	"encoding/pem"
	"net"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/services/directory/apply"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mail"
)

// Settings are the directory service's section of the configuration: its
// first start (config.Get[*Settings]; the identity providers' egress is
// config.IdPEgress, shared with authn).
type Settings struct {
	AdminPassword string // GATEHOUSE_ADMIN_PASSWORD; empty means generate on first start
	// BootstrapPublicKey is GATEHOUSE_BOOTSTRAP_PUBLIC_KEY: a PEM public
	// key registered for bootstrap-admin at first start instead of writing
	// a private key file (a cluster, where no file leaves a pod).
	BootstrapPublicKey string
	// BootstrapFile is GATEHOUSE_BOOTSTRAP_FILE, and BootstrapDocs its
	// documents (the gatehouse apply format, ${VAR} expanded from the
	// environment), applied once at first start as bootstrap-admin.
	BootstrapFile string
	BootstrapDocs []*apply.Doc
	// Mail is the SMTP relay (GATEHOUSE_SMTP_*).
	Mail mail.Config
	// DNSResolver is GATEHOUSE_DNS_RESOLVER: the host:port of the DNS
	// server that domain validations (TXT records) ask; empty, the
	// system's resolver.
	DNSResolver string
}

// Load implements config.Section.
func (s *Settings) Load(p *config.Parser, _ *config.Config) {
	*s = Settings{AdminPassword: p.Str("GATEHOUSE_ADMIN_PASSWORD", ""), BootstrapPublicKey: p.Str("GATEHOUSE_BOOTSTRAP_PUBLIC_KEY", "")}
	s.Mail.Load(p)
	if s.DNSResolver = p.Str("GATEHOUSE_DNS_RESOLVER", ""); s.DNSResolver != "" {
		if _, port, err := net.SplitHostPort(s.DNSResolver); err != nil || port == "" {
			p.Fail("GATEHOUSE_DNS_RESOLVER", "want host:port (e.g. 127.0.0.1:53)")
		}
	}
	if k := s.BootstrapPublicKey; k != "" {
		if b, _ := pem.Decode([]byte(k)); b == nil || b.Type != "PUBLIC KEY" {
			p.Fail("GATEHOUSE_BOOTSTRAP_PUBLIC_KEY", "want a PEM public key (-----BEGIN PUBLIC KEY-----)")
		}
	}
	if s.BootstrapFile = p.Str("GATEHOUSE_BOOTSTRAP_FILE", ""); s.BootstrapFile != "" {
		docs, err := apply.ParsePath(s.BootstrapFile, func(k string) (string, bool) {
			v := p.Getenv(k)
			return v, v != ""
		})
		if err != nil {
			p.Fail("GATEHOUSE_BOOTSTRAP_FILE", "%v", err)
		}
		s.BootstrapDocs = docs
	}
}
