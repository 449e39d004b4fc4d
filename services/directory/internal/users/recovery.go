package users

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"strings"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
)

// Recovery code events.
const (
	EventRecoveryCodesGenerated = "user.human.mfa.recoverycodes.generated"
	EventRecoveryCodeUsed       = "user.human.mfa.recoverycode.used"
	EventRecoveryCodesRemoved   = "user.human.mfa.recoverycodes.removed"
)

// RecoveryCodeCount is how many codes a generation makes.
const RecoveryCodeCount = 10

// recoveryAlphabet has no vowels (no words) and no look-alikes (0/o, 1/l).
const recoveryAlphabet = "23456789bcdfghjkmnpqrstvwxz"

type recoveryGenerated struct {
	// Hashes are the codes' keyed hashes (secrets.Hasher), never a code.
	Hashes [][]byte `json:"hashes"`
}

type recoveryUsed struct {
	Index int `json:"index"`
}

func registerRecoveryCodes(es *eventstore.Store) {
	es.Register(EventRecoveryCodesGenerated, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p recoveryGenerated
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM recovery_codes WHERE user_id = ?`, e.AggregateID); err != nil {
			return err
		}
		for i, h := range p.Hashes {
			if _, err := tx.Exec(ctx, `INSERT INTO recovery_codes (user_id, idx, hash, used) VALUES (?, ?, ?, ?)`,
				e.AggregateID, i, h, false); err != nil {
				return err
			}
		}
		return touch(ctx, tx, e)
	})
	es.Register(EventRecoveryCodeUsed, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p recoveryUsed
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE recovery_codes SET used = ? WHERE user_id = ? AND idx = ?`, true, e.AggregateID, p.Index); err != nil {
			return err
		}
		return touch(ctx, tx, e)
	})
	es.Register(EventRecoveryCodesRemoved, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p factorRef
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM recovery_codes WHERE user_id = ?`, e.AggregateID); err != nil {
			return err
		}
		if p.EndSessions {
			if err := CutAccess(ctx, tx, e.AggregateID, e.CreatedAt); err != nil {
				return err
			}
		}
		return touch(ctx, tx, e)
	})
}

type recoveryRow struct {
	Index int    `db:"idx"`
	Hash  []byte `db:"hash"`
	Used  bool   `db:"used"`
}

func (q *Queries) recoveryCodes(ctx context.Context, userID string) ([]recoveryRow, error) {
	var out []recoveryRow
	err := q.DB.Select(ctx, &out, `SELECT idx, hash, used FROM recovery_codes WHERE user_id = ? ORDER BY idx`, userID)
	return out, err
}

// RecoveryCodesLeft is how many unused recovery codes the user has.
func (q *Queries) RecoveryCodesLeft(ctx context.Context, userID string) (int, error) {
	var n int
	err := q.DB.Get(ctx, &n, `SELECT COUNT(*) FROM recovery_codes WHERE user_id = ? AND used = ?`, userID, false)
	return n, err
}

// NormalizeRecoveryCode is the form a code is hashed in: lower case,
// without the dash, spaces or anything else a person may type around it.
func NormalizeRecoveryCode(code string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(code) {
		if strings.ContainsRune(recoveryAlphabet, r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// newRecoveryCode is 10 characters of recoveryAlphabet (47 bits), shown
// as xxxxx-xxxxx.
func newRecoveryCode() string {
	const n = 10
	b := make([]byte, n)
	out := make([]byte, 0, n+1)
	for len(out) < n+1 {
		if _, err := rand.Read(b); err != nil {
			panic(err) // crypto/rand does not fail (Go 1.24+)
		}
		for _, c := range b {
			// Rejection sampling keeps every symbol equally likely.
			if int(c) >= 256-256%len(recoveryAlphabet) {
				continue
			}
			if len(out) == 5 {
				out = append(out, '-')
			}
			out = append(out, recoveryAlphabet[int(c)%len(recoveryAlphabet)])
			if len(out) == n+1 {
				break
			}
		}
	}
	return string(out)
}

// GenerateRecoveryCodes gives u RecoveryCodeCount new codes, replacing
// every earlier one; only their keyed hashes are stored. The codes are
// returned to be shown once.
func (c *Commands) GenerateRecoveryCodes(ctx context.Context, editor string, u *User, h Hasher) ([]string, []eventstore.Event, error) {
	if err := human(u); err != nil {
		return nil, nil, err
	}
	codes := make([]string, RecoveryCodeCount)
	hashes := make([][]byte, RecoveryCodeCount)
	for i := range codes {
		codes[i] = newRecoveryCode()
		hashes[i] = h.Hash(NormalizeRecoveryCode(codes[i]))
	}
	evs, err := c.push(ctx, editor, u, EventRecoveryCodesGenerated, recoveryGenerated{Hashes: hashes})
	if err != nil {
		return nil, nil, err
	}
	return codes, evs, nil
}

// UseRecoveryCode accepts one of u's unused recovery codes once and
// returns how many are left. A wrong or used code, and the loser of two
// uses racing with one code, are ErrBadCode.
func (c *Commands) UseRecoveryCode(ctx context.Context, u *User, h Hasher, code string) (left int, err error) {
	rows, err := c.Q.recoveryCodes(ctx, u.ID)
	if err != nil {
		return 0, err
	}
	norm := NormalizeRecoveryCode(code)
	if len(norm) != 10 {
		return 0, ErrBadCode
	}
	sum := h.Hash(norm)
	match, unused := -1, 0
	for _, r := range rows {
		if r.Used {
			continue
		}
		unused++
		if subtle.ConstantTimeCompare(r.Hash, sum) == 1 {
			match = r.Index
		}
	}
	if match < 0 {
		return 0, ErrBadCode
	}
	_, err = c.ES.Push(ctx, u.ID, eventstore.Command{Aggregate: u.Aggregate(), Version: u.Version,
		Events: []eventstore.Pending{{Type: EventRecoveryCodeUsed, Payload: recoveryUsed{Index: match}}}})
	if errors.Is(err, eventstore.ErrConcurrent) {
		return 0, ErrBadCode
	}
	if err != nil {
		return 0, err
	}
	return unused - 1, nil
}
