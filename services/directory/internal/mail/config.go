package mail

import (
	"net"
	"net/mail"
	"net/netip"
	"os"
	"strings"

	"github.com/gatehouse-id/gatehouse/pkg/config"
)

// TLS modes of GATEHOUSE_SMTP_TLS.
const (
	TLSNone     = "none"     // plain text: loopback hosts only, unless allowed
	TLSStartTLS = "starttls" // STARTTLS, required (the default)
	TLSImplicit = "tls"      // TLS from the first byte (SMTPS)
)

// Config is the SMTP relay (GATEHOUSE_SMTP_*). Without a host there is no
// relay: the embedded server then writes messages as files, and the
// distributed services refuse the features that send mail.
type Config struct {
	Host     string // GATEHOUSE_SMTP_HOST
	Port     int    // GATEHOUSE_SMTP_PORT; default 587 (starttls), 465 (tls) or 25 (none)
	From     string // GATEHOUSE_SMTP_FROM, an address, optionally with a name
	User     string // GATEHOUSE_SMTP_USER
	Password string // GATEHOUSE_SMTP_PASSWORD, or the file GATEHOUSE_SMTP_PASSWORD_FILE
	TLS      string // GATEHOUSE_SMTP_TLS
}

// Enabled reports whether a relay is configured.
func (c Config) Enabled() bool { return c.Host != "" }

// Load reads and checks the SMTP variables; a problem names its variable.
func (c *Config) Load(p *config.Parser) {
	*c = Config{Host: p.Str("GATEHOUSE_SMTP_HOST", ""), From: p.Str("GATEHOUSE_SMTP_FROM", ""),
		User: p.Str("GATEHOUSE_SMTP_USER", ""), TLS: strings.ToLower(p.Str("GATEHOUSE_SMTP_TLS", TLSStartTLS))}
	c.Password = p.Getenv("GATEHOUSE_SMTP_PASSWORD")
	if f := p.Str("GATEHOUSE_SMTP_PASSWORD_FILE", ""); f != "" {
		if c.Password != "" {
			p.Fail("GATEHOUSE_SMTP_PASSWORD_FILE", "set it or GATEHOUSE_SMTP_PASSWORD, not both")
		}
		b, err := os.ReadFile(f) // #nosec G304 -- the operator's own file
		if err != nil {
			p.Fail("GATEHOUSE_SMTP_PASSWORD_FILE", "%v", err)
		}
		c.Password = strings.TrimRight(string(b), "\r\n")
	}
	defPort := 587
	switch c.TLS {
	case TLSStartTLS:
	case TLSImplicit:
		defPort = 465
	case TLSNone:
		defPort = 25
	default:
		p.Fail("GATEHOUSE_SMTP_TLS", "want none, starttls or tls, not %q", c.TLS)
	}
	c.Port = p.Int("GATEHOUSE_SMTP_PORT", defPort)
	if c.Port < 1 || c.Port > 65535 {
		p.Fail("GATEHOUSE_SMTP_PORT", "want a port from 1 to 65535")
	}
	if c.Host == "" {
		for _, name := range []string{"GATEHOUSE_SMTP_FROM", "GATEHOUSE_SMTP_USER", "GATEHOUSE_SMTP_PASSWORD", "GATEHOUSE_SMTP_PASSWORD_FILE", "GATEHOUSE_SMTP_PORT"} {
			if p.Str(name, "") != "" {
				p.Fail("GATEHOUSE_SMTP_HOST", "is required when %s is set", name)
				break
			}
		}
		return
	}
	if strings.ContainsAny(c.Host, "/ :") && net.ParseIP(c.Host) == nil {
		p.Fail("GATEHOUSE_SMTP_HOST", "want a host name or an IP address, without a port (GATEHOUSE_SMTP_PORT)")
	}
	if c.From == "" {
		p.Fail("GATEHOUSE_SMTP_FROM", "is required with GATEHOUSE_SMTP_HOST (the sender address)")
	} else if _, err := mail.ParseAddress(c.From); err != nil {
		p.Fail("GATEHOUSE_SMTP_FROM", "not an e-mail address: %v", err)
	}
	if (c.User == "") != (c.Password == "") {
		p.Fail("GATEHOUSE_SMTP_USER", "set it together with GATEHOUSE_SMTP_PASSWORD (or _FILE)")
	}
	if c.TLS == TLSNone && !loopback(c.Host) && !p.Bool("GATEHOUSE_SMTP_ALLOW_PLAINTEXT") {
		p.Fail("GATEHOUSE_SMTP_TLS", "none sends mail and the relay's password in clear text: only to a loopback host, "+
			"unless GATEHOUSE_SMTP_ALLOW_PLAINTEXT=true")
	}
}

// loopback reports whether host is localhost or a loopback address.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}
