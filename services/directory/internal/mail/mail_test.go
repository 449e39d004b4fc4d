package mail_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mail"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// section adapts mail.Config to config.Section for the tests.
type section struct{ mail.Config }

func (s *section) Load(p *config.Parser, _ *config.Config) { s.Config.Load(p) }

func loadConfig(t *testing.T, env map[string]string) (mail.Config, error) {
	t.Helper()
	base := map[string]string{"GATEHOUSE_ISSUER": "http://localhost:8080"}
	for k, v := range env {
		base[k] = v
	}
	s := &section{}
	_, err := config.Load(config.RoleEdge, func(k string) string { return base[k] }, s)
	return s.Config, err
}

func TestConfig(t *testing.T) {
	t.Parallel()
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		want mail.Config
		err  string // a variable the error names
	}{
		{"none", nil, mail.Config{TLS: "starttls", Port: 587}, ""},
		{"relay", map[string]string{"GATEHOUSE_SMTP_HOST": "smtp.example.com", "GATEHOUSE_SMTP_FROM": "Id <id@example.com>",
			"GATEHOUSE_SMTP_USER": "u", "GATEHOUSE_SMTP_PASSWORD_FILE": pwFile},
			mail.Config{Host: "smtp.example.com", Port: 587, From: "Id <id@example.com>", User: "u", Password: "s3cret", TLS: "starttls"}, ""},
		{"tls port", map[string]string{"GATEHOUSE_SMTP_HOST": "smtp.example.com", "GATEHOUSE_SMTP_FROM": "id@example.com", "GATEHOUSE_SMTP_TLS": "tls"},
			mail.Config{Host: "smtp.example.com", Port: 465, From: "id@example.com", TLS: "tls"}, ""},
		{"plain loopback", map[string]string{"GATEHOUSE_SMTP_HOST": "127.0.0.1", "GATEHOUSE_SMTP_PORT": "1025", "GATEHOUSE_SMTP_FROM": "id@example.com", "GATEHOUSE_SMTP_TLS": "none"},
			mail.Config{Host: "127.0.0.1", Port: 1025, From: "id@example.com", TLS: "none"}, ""},
		{"plain remote", map[string]string{"GATEHOUSE_SMTP_HOST": "smtp.example.com", "GATEHOUSE_SMTP_FROM": "id@example.com", "GATEHOUSE_SMTP_TLS": "none"},
			mail.Config{}, "GATEHOUSE_SMTP_TLS"},
		{"plain remote allowed", map[string]string{"GATEHOUSE_SMTP_HOST": "smtp.example.com", "GATEHOUSE_SMTP_FROM": "id@example.com", "GATEHOUSE_SMTP_TLS": "none",
			"GATEHOUSE_SMTP_ALLOW_PLAINTEXT": "true"}, mail.Config{Host: "smtp.example.com", Port: 25, From: "id@example.com", TLS: "none"}, ""},
		{"bad tls", map[string]string{"GATEHOUSE_SMTP_HOST": "smtp.example.com", "GATEHOUSE_SMTP_FROM": "id@example.com", "GATEHOUSE_SMTP_TLS": "ssl"}, mail.Config{}, "GATEHOUSE_SMTP_TLS"},
		{"no from", map[string]string{"GATEHOUSE_SMTP_HOST": "smtp.example.com"}, mail.Config{}, "GATEHOUSE_SMTP_FROM"},
		{"bad from", map[string]string{"GATEHOUSE_SMTP_HOST": "smtp.example.com", "GATEHOUSE_SMTP_FROM": "nobody"}, mail.Config{}, "GATEHOUSE_SMTP_FROM"},
		{"from without host", map[string]string{"GATEHOUSE_SMTP_FROM": "id@example.com"}, mail.Config{}, "GATEHOUSE_SMTP_HOST"},
		{"host with port", map[string]string{"GATEHOUSE_SMTP_HOST": "smtp.example.com:25", "GATEHOUSE_SMTP_FROM": "id@example.com"}, mail.Config{}, "GATEHOUSE_SMTP_HOST"},
		{"bad port", map[string]string{"GATEHOUSE_SMTP_HOST": "smtp.example.com", "GATEHOUSE_SMTP_FROM": "id@example.com", "GATEHOUSE_SMTP_PORT": "70000"}, mail.Config{}, "GATEHOUSE_SMTP_PORT"},
		{"user without password", map[string]string{"GATEHOUSE_SMTP_HOST": "smtp.example.com", "GATEHOUSE_SMTP_FROM": "id@example.com", "GATEHOUSE_SMTP_USER": "u"}, mail.Config{}, "GATEHOUSE_SMTP_USER"},
		{"both passwords", map[string]string{"GATEHOUSE_SMTP_HOST": "smtp.example.com", "GATEHOUSE_SMTP_FROM": "id@example.com", "GATEHOUSE_SMTP_USER": "u",
			"GATEHOUSE_SMTP_PASSWORD": "p", "GATEHOUSE_SMTP_PASSWORD_FILE": pwFile}, mail.Config{}, "GATEHOUSE_SMTP_PASSWORD_FILE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := loadConfig(t, c.env)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err+":") {
					t.Fatalf("error %v; want one naming %s", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func TestRender(t *testing.T) {
	t.Parallel()
	d := mail.Data{Org: "ACME", Name: `Eve <script>`, LoginName: "eve@acme.test", Link: "https://id.example.com/ui/login/password/set?code=abc&userID=1",
		Expires: time.Date(2026, 11, 28, 15, 0, 0, 0, time.UTC)}
	for lang, subject := range map[string]string{"en": "Reset your password", "de": "Passwort zurücksetzen", "fr": "Reset your password"} {
		d.Lang = lang
		r, err := mail.Render(mail.KindPasswordReset, d)
		if err != nil {
			t.Fatal(err)
		}
		if r.Subject != subject {
			t.Errorf("%s: subject %q; want %q", lang, r.Subject, subject)
		}
		if !strings.Contains(r.Text, d.Link) || !strings.Contains(r.Text, "2026-11-28 15:00 UTC") || !strings.Contains(r.Text, "eve@acme.test") {
			t.Errorf("%s: text lacks the link, the expiry or the login name:\n%s", lang, r.Text)
		}
		if !strings.Contains(r.HTML, `href="https://id.example.com/ui/login/password/set?code=abc&amp;userID=1"`) ||
			strings.Contains(r.HTML, "<script>") || !strings.Contains(r.HTML, "Eve &lt;script&gt;") {
			t.Errorf("%s: HTML link or escaping wrong:\n%s", lang, r.HTML)
		}
		if strings.Contains(r.HTML, "<img") || strings.Contains(r.HTML, "src=") {
			t.Errorf("%s: HTML loads a remote resource:\n%s", lang, r.HTML)
		}
	}
	if _, err := mail.Render("no_such_kind", d); err == nil {
		t.Error("an unknown kind rendered")
	}
}

// Every kind renders in every language with what it must say: the link
// and code where it has them, the new address in a change notice; no
// template is missing or left in another language.
func TestRenderEveryKind(t *testing.T) {
	t.Parallel()
	d := mail.Data{Org: "ACME", Name: "Eve", LoginName: "eve@acme.test", Link: "https://id.example.com/ui/x?code=LINKCODE",
		Code: "THECODE", Expires: time.Date(2026, 11, 28, 15, 0, 0, 0, time.UTC), NewEmail: "new@acme.test",
		When: time.Date(2026, 11, 28, 14, 0, 0, 0, time.UTC)}
	must := map[string][]string{
		mail.KindPasswordReset:     {"LINKCODE", "eve@acme.test"},
		mail.KindEmailVerification: {"LINKCODE", "THECODE", "eve@acme.test"},
		mail.KindInitialization:    {"LINKCODE", "eve@acme.test"},
		mail.KindEmailChanged:      {"new@acme.test", "2026-11-28 14:00 UTC"},
		mail.KindPasswordChanged:   {"2026-11-28 14:00 UTC", "eve@acme.test"},
	}
	subjects := map[string]bool{}
	for _, kind := range mail.Kinds {
		for _, lang := range mail.Languages {
			d.Lang = lang
			r, err := mail.Render(kind, d)
			if err != nil {
				t.Fatalf("%s.%s: %v", kind, lang, err)
			}
			if subjects[r.Subject] || r.Subject == "" {
				t.Errorf("%s.%s: subject %q is empty or another message's", kind, lang, r.Subject)
			}
			subjects[r.Subject] = true
			for _, w := range must[kind] {
				if !strings.Contains(r.Text, w) || !strings.Contains(r.HTML, w) {
					t.Errorf("%s.%s: text or HTML lacks %q", kind, lang, w)
				}
			}
			if !strings.Contains(r.HTML, `lang="`+lang+`"`) {
				t.Errorf("%s.%s: HTML not marked %s", kind, lang, lang)
			}
		}
	}
}

// recorder is a Sender that keeps what it is given, failing as told.
type recorder struct {
	mu   sync.Mutex
	sent []*gomail.Msg
	fail error
}

func (r *recorder) Send(_ context.Context, m *gomail.Msg) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	r.sent = append(r.sent, m)
	return nil
}

func (r *recorder) Describe() string { return "recorder" }

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sent)
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	db     *db.DB
	sealer mail.Sealer
	clock  *clock
}

func newFixture(t *testing.T, d db.Dialect) fixture {
	t.Helper()
	key := bytes.Repeat([]byte{7}, 32)
	c, err := secrets.NewCipher(key, "gatehouse mail test v1")
	if err != nil {
		t.Fatal(err)
	}
	return fixture{db: storetest.Open(t, d), sealer: mail.Sealer{Cipher: c}, clock: &clock{now: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}}
}

func (f fixture) outbox(s mail.Sender) *mail.Outbox {
	return &mail.Outbox{DB: f.db, Sender: s, Sealer: f.sealer, From: "Gatehouse <no-reply@id.example.com>", Host: "id.example.com",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: f.clock.Now}
}

func (f fixture) queue(t *testing.T, id, user string) {
	t.Helper()
	sealed, err := f.sealer.Seal(user, mail.KindPasswordReset, mail.Data{Lang: "de", Org: "ACME", Name: "Eve", LoginName: "eve",
		Link: "https://id.example.com/reset?code=SECRET-" + id, Expires: f.clock.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if err := mail.Queue(context.Background(), f.db, mail.Pending{ID: id, UserID: user, Kind: mail.KindPasswordReset,
		Recipient: "eve@acme.test", Sealed: sealed}, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
}

type outboxRow struct {
	State    string    `db:"state"`
	Attempts int       `db:"attempts"`
	HasData  bool      `db:"has_data"`
	Next     time.Time `db:"next_attempt_at"`
	Err      string    `db:"last_error"`
}

func (f fixture) row(t *testing.T, id string) outboxRow {
	t.Helper()
	var r outboxRow
	if err := f.db.Get(context.Background(), &r, `SELECT state, attempts, data IS NOT NULL AS has_data, next_attempt_at, last_error
		FROM mail_outbox WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	return r
}

// A queued message is sent once, in the recipient's language, with a
// Message-ID made of its id; its sealed data is then cleared.
func TestOutboxSendsOnce(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newFixture(t, d)
		rec := &recorder{}
		o := f.outbox(rec)
		f.queue(t, "m1", "u1")
		ctx := context.Background()
		if n, err := o.Deliver(ctx); err != nil || n != 1 {
			t.Fatalf("Deliver: %d, %v; want 1 sent", n, err)
		}
		if n, err := o.Deliver(ctx); err != nil || n != 0 || rec.count() != 1 {
			t.Fatalf("second Deliver: %d, %v, %d sent in all; want nothing more", n, err, rec.count())
		}
		m := rec.sent[0]
		var buf bytes.Buffer
		if _, err := m.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		raw := buf.String()
		for _, want := range []string{"Message-ID: <m1@id.example.com>", "Auto-Submitted: auto-generated", "To: <eve@acme.test>",
			"Subject: =?UTF-8?q?Passwort_zur=C3=BCcksetzen?=", "text/plain", "text/html"} {
			if !strings.Contains(raw, want) {
				t.Errorf("message lacks %q:\n%s", want, raw)
			}
		}
		if r := f.row(t, "m1"); r.State != mail.StateSent || r.HasData || r.Attempts != 1 {
			t.Fatalf("row after sending: %+v; want sent, data cleared, 1 attempt", r)
		}
	})
}

// A relay that is down delays a message (backoff capped at a minute); it
// goes once the relay is back. A permanent refusal ends it at once, and
// so does the budget.
func TestOutboxRetries(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newFixture(t, d)
		rec := &recorder{fail: errors.New("dial tcp 127.0.0.1:25: connection refused")}
		o := f.outbox(rec)
		ctx := context.Background()
		f.queue(t, "down", "u1")
		for i := 1; i <= 10; i++ {
			if n, err := o.Deliver(ctx); err != nil || n != 0 {
				t.Fatalf("try %d: %d, %v", i, n, err)
			}
			r := f.row(t, "down")
			wait := r.Next.Sub(f.clock.Now())
			if r.State != mail.StatePending || r.Attempts != i || !r.HasData || wait <= 0 || wait > mail.MaxBackoff ||
				!strings.Contains(r.Err, "connection refused") {
				t.Fatalf("try %d: %+v (next in %v); want pending, a wait of at most %v", i, r, wait, mail.MaxBackoff)
			}
			// Not due yet: nothing is tried.
			if _, err := o.Deliver(ctx); err != nil || f.row(t, "down").Attempts != i {
				t.Fatalf("try %d: retried before its time", i)
			}
			f.clock.add(wait)
		}
		rec.mu.Lock()
		rec.fail = nil
		rec.mu.Unlock()
		if n, err := o.Deliver(ctx); err != nil || n != 1 || rec.count() != 1 {
			t.Fatalf("relay back: %d, %v; want the message sent once", n, err)
		}

		// A 5xx answer: failed at once, data cleared.
		f.queue(t, "refused", "u2")
		perm := f.outbox(permanentSender{})
		if _, err := perm.Deliver(ctx); err != nil {
			t.Fatal(err)
		}
		if r := f.row(t, "refused"); r.State != mail.StateFailed || r.HasData || r.Attempts != 1 {
			t.Fatalf("after a permanent refusal: %+v; want failed at once", r)
		}

		// The budget: a message retried for a day is given up.
		rec.mu.Lock()
		rec.fail = errors.New("451 4.3.0 try again later")
		rec.mu.Unlock()
		f.queue(t, "late", "u3")
		if _, err := o.Deliver(ctx); err != nil {
			t.Fatal(err)
		}
		f.clock.add(mail.Budget)
		if _, err := o.Deliver(ctx); err != nil {
			t.Fatal(err)
		}
		if r := f.row(t, "late"); r.State != mail.StateFailed || r.HasData {
			t.Fatalf("after the budget: %+v; want failed", r)
		}
	})
}

// permanentSender refuses as a relay's 5xx does.
type permanentSender struct{}

func (permanentSender) Send(ctx context.Context, m *gomail.Msg) error {
	return mail.PermanentError(errors.New("550 5.1.1 mailbox unavailable"))
}
func (permanentSender) Describe() string { return "refuser" }

// Two replicas' outboxes over one database deliver each message once.
func TestOutboxOneReplicaAtATime(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newFixture(t, d)
		for i := range 20 {
			f.queue(t, "m"+string(rune('a'+i)), "u")
		}
		rec := &recorder{}
		a, b := f.outbox(rec), f.outbox(rec)
		var wg sync.WaitGroup
		for _, o := range []*mail.Outbox{a, b, a, b} {
			wg.Go(func() {
				if _, err := o.Deliver(context.Background()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if rec.count() != 20 {
			t.Fatalf("%d messages sent; want each of 20 once", rec.count())
		}
	})
}

// Without a relay the embedded server writes .eml files, 0600 in a 0700
// folder; a second delivery of one id replaces its file.
func TestDirSender(t *testing.T) {
	t.Parallel()
	f := newFixture(t, db.SQLite)
	dir := filepath.Join(t.TempDir(), "mail")
	o := f.outbox(mail.Dir{Path: dir})
	f.queue(t, "m1", "u1")
	if n, err := o.Deliver(context.Background()); err != nil || n != 1 {
		t.Fatalf("Deliver: %d, %v", n, err)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("folder: %v, %v; want 0700", fi, err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) != 1 || filepath.Base(files[0]) != "m1@id.example.com.eml" {
		t.Fatalf("files %v; want m1@id.example.com.eml", files)
	}
	fi, err = os.Stat(files[0])
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v, %v; want 0600", fi.Mode(), err)
	}
	b, _ := os.ReadFile(files[0])
	if !strings.Contains(string(b), "SECRET-m1") {
		t.Fatalf("the file lacks the link:\n%s", b)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 7: mail.MaxBackoff, 30: mail.MaxBackoff} {
		for range 50 {
			if got := mail.Backoff(n); got < want/2 || got > want {
				t.Fatalf("Backoff(%d) = %v; want within [%v, %v]", n, got, want/2, want)
			}
		}
	}
}

func TestRecent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, db.SQLite)
	ctx := context.Background()
	f.queue(t, "m1", "u1")
	for _, c := range []struct {
		user, to, kind string
		after          time.Duration
		want           bool
	}{{"u1", "x@y.test", mail.KindPasswordReset, 0, true}, {"u2", "x@y.test", mail.KindPasswordReset, 0, false},
		{"u1", "x@y.test", "other", 0, false}, {"u1", "x@y.test", mail.KindPasswordReset, mail.Throttle, false},
		// Another user with the address: one message a minute to it.
		{"u2", "Eve@ACME.test", mail.KindPasswordReset, 0, true}, {"u2", "eve@acme.test", "other", 0, false}} {
		got, err := mail.Recent(ctx, f.db, c.user, c.to, c.kind, f.clock.Now().Add(c.after))
		if err != nil || got != c.want {
			t.Errorf("Recent(%s, %s, %s, +%v) = %v, %v; want %v", c.user, c.to, c.kind, c.after, got, err, c.want)
		}
	}
}
