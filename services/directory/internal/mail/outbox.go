package mail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
)

// Message states in mail_outbox.
const (
	StatePending = "pending"
	StateSent    = "sent"
	StateFailed  = "failed"
)

// Delivery's pace.
const (
	// Budget is how long a message is retried before it is given up.
	Budget = 24 * time.Hour
	// MaxBackoff caps the wait between two tries.
	MaxBackoff = 60 * time.Second
	// Throttle is the least time between two messages of one kind to one
	// user (Recent): a flood of requests queues one.
	Throttle = time.Minute
	// Retention keeps sent and failed rows (without their data) this long.
	Retention = 7 * 24 * time.Hour
	batch     = 50
)

// Sealer seals and opens messages' data with the master key.
type Sealer struct{ Cipher *secrets.Cipher }

// Seal encrypts d for userID's message of kind.
func (s Sealer) Seal(userID, kind string, d Data) ([]byte, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	return s.Cipher.Encrypt(b, []byte(userID+"/"+kind))
}

func (s Sealer) open(userID, kind string, sealed []byte) (Data, error) {
	var d Data
	b, err := s.Cipher.Decrypt(sealed, []byte(userID+"/"+kind))
	if err != nil {
		return d, err
	}
	return d, json.Unmarshal(b, &d)
}

// Pending is a message to queue.
type Pending struct {
	// ID is unique and stable: the outbox row's key and, under the
	// issuer's host, the message's Message-ID, so a message delivered
	// twice (a crash between the relay's answer and its record) is one
	// message to the receiving side.
	ID        string
	UserID    string
	Kind      string
	Recipient string
	Sealed    []byte // Sealer.Seal's output
}

// Queue adds p to the outbox in q, the transaction of the event that
// causes it (a reducer).
func Queue(ctx context.Context, q db.Querier, p Pending, now time.Time) error {
	if _, err := q.Exec(ctx, `INSERT INTO mail_outbox (id, user_id, kind, recipient, data, state, next_attempt_at, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, p.ID, p.UserID, p.Kind, p.Recipient, p.Sealed, StatePending, now, now); err != nil {
		return fmt.Errorf("mail: queue %s: %w", p.Kind, err)
	}
	return nil
}

// Recent reports whether a message of kind to userID, or to the address
// to, was queued within Throttle before now: a flood of requests, for one
// user or for many users sharing one address, queues one message a
// minute.
func Recent(ctx context.Context, q db.Querier, userID, to, kind string, now time.Time) (bool, error) {
	var n int
	if err := q.Get(ctx, &n, `SELECT COUNT(*) FROM mail_outbox WHERE kind = ? AND created_at > ? AND (user_id = ? OR LOWER(recipient) = ?)`,
		kind, now.Add(-Throttle), userID, strings.ToLower(to)); err != nil {
		return false, fmt.Errorf("mail: recent messages: %w", err)
	}
	return n > 0, nil
}

// Outbox delivers queued messages.
type Outbox struct {
	DB     *db.DB
	Sender Sender
	Sealer Sealer
	// From is the sender address (GATEHOUSE_SMTP_FROM; for files, one at
	// the issuer's host).
	From string
	// Host names the messages (Message-ID: <id@Host>): the issuer's.
	Host   string
	Logger *slog.Logger
	Now    func() time.Time

	kick chan struct{}
}

var messages = telemetry.MustCounter("gatehouse.mail.messages",
	"Mail delivery outcomes by kind: sent, retry (a temporary failure) and failed (a permanent failure or the retry budget spent).",
	"kind", "result")

// NewFrom is the default sender of files: no-reply at the issuer's host.
func NewFrom(issuer *url.URL) string { return "Gatehouse <no-reply@" + issuer.Hostname() + ">" }

func (o *Outbox) now() time.Time {
	if o.Now != nil {
		return o.Now().UTC()
	}
	return time.Now().UTC()
}

// Kick asks Run for a round now (a message was just queued).
func (o *Outbox) Kick() {
	select {
	case o.kicks() <- struct{}{}:
	default:
	}
}

func (o *Outbox) kicks() chan struct{} {
	if o.kick == nil {
		o.kick = make(chan struct{}, 1)
	}
	return o.kick
}

// Run delivers due messages at once, when kicked, and every poll until
// ctx ends. Failures are logged; the next round retries.
func (o *Outbox) Run(ctx context.Context, poll time.Duration) {
	kick := o.kicks()
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if _, err := o.Deliver(ctx); err != nil && ctx.Err() == nil {
			o.Logger.WarnContext(ctx, "mail: delivery round failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
	}
}

type row struct {
	ID        string    `db:"id"`
	UserID    string    `db:"user_id"`
	Kind      string    `db:"kind"`
	Recipient string    `db:"recipient"`
	Data      []byte    `db:"data"`
	Attempts  int       `db:"attempts"`
	CreatedAt time.Time `db:"created_at"`
}

// Deliver sends the messages due now, at most batch, and returns how many
// were sent. Each try is claimed first (claim), so of several replicas,
// or rounds, one sends it.
func (o *Outbox) Deliver(ctx context.Context) (int, error) {
	now := o.now()
	var rows []row
	if err := o.DB.Select(ctx, &rows, `SELECT id, user_id, kind, recipient, data, attempts, created_at FROM mail_outbox
		WHERE state = ? AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?`, StatePending, now, batch); err != nil {
		return 0, fmt.Errorf("mail: read outbox: %w", err)
	}
	sent := 0
	for _, r := range rows {
		if ctx.Err() != nil {
			return sent, ctx.Err()
		}
		ok, err := o.claim(ctx, r)
		if err != nil {
			return sent, err
		}
		if !ok {
			continue // another replica's, or round's, try
		}
		err = o.send(ctx, r)
		if err == nil {
			sent++
		}
		if err := o.record(ctx, r, err); err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// lease is how long a claimed try keeps the message from others: past it
// (the process died while sending), the message is tried again.
const lease = 2 * sendTimeout

// claim counts r's try and leases the message for it, unless another
// claimed it since r was read.
func (o *Outbox) claim(ctx context.Context, r row) (bool, error) {
	now := o.now()
	res, err := o.DB.Exec(ctx, `UPDATE mail_outbox SET attempts = attempts + 1, next_attempt_at = ?
		WHERE id = ? AND state = ? AND attempts = ?`, now.Add(lease), r.ID, StatePending, r.Attempts)
	if err != nil {
		return false, fmt.Errorf("mail: claim: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// send builds r's message and hands it to the sender.
func (o *Outbox) send(ctx context.Context, r row) error {
	d, err := o.Sealer.open(r.UserID, r.Kind, r.Data)
	if err != nil {
		return permanent{fmt.Errorf("mail: open message data: %w", err)}
	}
	out, err := Render(r.Kind, d)
	if err != nil {
		return permanent{err}
	}
	m := gomail.NewMsg()
	if err := m.From(o.From); err != nil {
		return permanent{fmt.Errorf("mail: sender: %w", err)}
	}
	if err := m.To(r.Recipient); err != nil {
		return permanent{fmt.Errorf("mail: recipient: %w", err)}
	}
	m.Subject(out.Subject)
	m.SetMessageIDWithValue(r.ID + "@" + o.Host)
	m.SetDate()
	m.SetGenHeader("Auto-Submitted", "auto-generated")
	m.SetBodyString(gomail.TypeTextPlain, out.Text)
	m.AddAlternativeString(gomail.TypeTextHTML, out.HTML)
	return o.Sender.Send(ctx, m)
}

// record writes the outcome of one try: sent, another try after a
// backoff, or failed (permanent, or the budget spent).
func (o *Outbox) record(ctx context.Context, r row, sendErr error) error {
	now := o.now()
	log := o.Logger.With("mail_id", r.ID, "user_id", r.UserID, "kind", r.Kind)
	var err error
	switch {
	case sendErr == nil:
		messages.Inc(ctx, r.Kind, "sent")
		log.InfoContext(ctx, "mail: sent", "attempts", r.Attempts+1)
		_, err = o.DB.Exec(ctx, `UPDATE mail_outbox SET state = ?, data = NULL, done_at = ?, last_error = '' WHERE id = ?`,
			StateSent, now, r.ID)
	case Permanent(sendErr) || now.Sub(r.CreatedAt) >= Budget:
		messages.Inc(ctx, r.Kind, "failed")
		// The error names the relay's answer, never the message's data.
		log.ErrorContext(ctx, "mail: given up", "attempts", r.Attempts+1, "err", sendErr)
		_, err = o.DB.Exec(ctx, `UPDATE mail_outbox SET state = ?, data = NULL, done_at = ?, last_error = ? WHERE id = ?`,
			StateFailed, now, errText(sendErr), r.ID)
	default:
		messages.Inc(ctx, r.Kind, "retry")
		wait := Backoff(r.Attempts + 1)
		log.WarnContext(ctx, "mail: not sent; retrying", "attempts", r.Attempts+1, "retry_in", wait.String(), "err", sendErr)
		_, err = o.DB.Exec(ctx, `UPDATE mail_outbox SET next_attempt_at = ?, last_error = ? WHERE id = ?`,
			now.Add(wait), errText(sendErr), r.ID)
	}
	if err != nil {
		return fmt.Errorf("mail: record delivery: %w", err)
	}
	return nil
}

func errText(err error) string {
	s := err.Error()
	if len(s) > 500 {
		s = s[:500]
	}
	return s
}

// Backoff is the wait after the nth failed try: 1 s doubling up to
// MaxBackoff, with full jitter over its upper half so that replicas and
// messages do not retry in step.
func Backoff(n int) time.Duration {
	d := time.Second
	for i := 1; i < n && d < MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, MaxBackoff)
	return d/2 + rand.N(d/2+1) // #nosec G404 -- jitter, not a secret
}

// PruneSteps delete delivered and given-up messages after Retention.
func PruneSteps() []db.PruneStep {
	return []db.PruneStep{{
		Table: "mail_outbox",
		Query: `DELETE FROM mail_outbox WHERE id IN (SELECT id FROM mail_outbox
			WHERE state <> '` + StatePending + `' AND done_at < ? LIMIT ` + db.Batch + `)`,
		Args: func(now time.Time) []any { return []any{now.Add(-Retention)} },
	}}
}

// ErrUnavailable is the answer of a feature that sends mail where none
// can be sent (a distributed deployment without GATEHOUSE_SMTP_HOST).
var ErrUnavailable = errors.New("no mail relay is configured: set GATEHOUSE_SMTP_HOST (and GATEHOUSE_SMTP_FROM)")
