package mail

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// Sender hands a message on: to an SMTP relay, or to a folder.
type Sender interface {
	Send(ctx context.Context, m *gomail.Msg) error
	// Describe says where messages go, for the start log.
	Describe() string
}

// SMTP sends through the configured relay, one connection per message.
type SMTP struct{ Config Config }

// sendTimeout bounds one message's dial, TLS and transfer.
const sendTimeout = 30 * time.Second

// Send implements Sender.
func (s SMTP) Send(ctx context.Context, m *gomail.Msg) error {
	opts := []gomail.Option{gomail.WithPort(s.Config.Port), gomail.WithTimeout(sendTimeout)}
	switch s.Config.TLS {
	case TLSImplicit:
		opts = append(opts, gomail.WithSSL())
	case TLSNone:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	default:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	}
	if s.Config.User != "" {
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(s.Config.User), gomail.WithPassword(s.Config.Password))
	}
	c, err := gomail.NewClient(s.Config.Host, opts...)
	if err != nil {
		return permanent{fmt.Errorf("mail: SMTP client: %w", err)}
	}
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	if err := c.DialAndSendWithContext(ctx, m); err != nil {
		var se *gomail.SendError
		if errors.As(err, &se) && se.ErrorCode() >= 500 && se.ErrorCode() < 600 {
			return permanent{err}
		}
		return err
	}
	return nil
}

// Describe implements Sender.
func (s SMTP) Describe() string {
	return fmt.Sprintf("SMTP relay %s:%d (%s)", s.Config.Host, s.Config.Port, s.Config.TLS)
}

// Dir writes each message as an .eml file (RFC 5322) named after its id
// into Path: the embedded server's default without a relay, so sign-up
// and reset mails can be read on a laptop. The folder is 0700 and the
// files 0600: they hold one-time links.
type Dir struct{ Path string }

// Send implements Sender.
func (d Dir) Send(_ context.Context, m *gomail.Msg) error {
	if err := os.MkdirAll(d.Path, 0o700); err != nil {
		return fmt.Errorf("mail: folder: %w", err)
	}
	id := m.GetMessageID()
	if id == "" {
		return permanent{errors.New("mail: message without a Message-ID")}
	}
	name := filepath.Join(d.Path, fileName(id)+".eml")
	tmp := name + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600) // #nosec G304 -- a name made of the message id
	if err != nil {
		return fmt.Errorf("mail: write: %w", err)
	}
	if _, err := m.WriteTo(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("mail: write: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("mail: write: %w", err)
	}
	// The rename makes a message appear whole, and a second delivery of
	// the same id replaces the file rather than adding one.
	return os.Rename(tmp, name)
}

// Describe implements Sender.
func (d Dir) Describe() string { return "files in " + d.Path }

// fileName keeps the safe characters of a Message-ID.
func fileName(id string) string {
	out := make([]byte, 0, len(id))
	for _, c := range []byte(id) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-', c == '_', c == '@':
			out = append(out, c)
		}
	}
	return string(out)
}

// permanent marks a failure that no retry mends (an SMTP 5xx answer, a
// message that cannot be built).
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// PermanentError marks err as one no retry mends.
func PermanentError(err error) error { return permanent{err} }

// Permanent reports whether err ends a message's delivery at once.
func Permanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}
