package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// A browser may type DeviceAttempts wrong user codes in DeviceAttemptWindow
// (from the first one); then /device refuses it until the window ends. With
// a user code of 34.5 bits (RFC 8628 §6.1), a browser guesses one code of a
// hundred million in a window; edge bounds what an address tries with many
// browsers.
const (
	DeviceAttempts      = 5
	DeviceAttemptWindow = 15 * time.Minute
)

// DeviceBlocked reports whether the browser typed DeviceAttempts wrong
// user codes in the current window.
func (s *Store) DeviceBlocked(ctx context.Context, userAgentID string, now time.Time) (bool, error) {
	var failures int
	err := s.DB.Get(ctx, &failures, `SELECT failures FROM device_attempts WHERE user_agent_id = ? AND window_start > ?`,
		userAgentID, now.Add(-DeviceAttemptWindow))
	if errors.Is(db.NotFound(err), db.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read device attempts: %w", err)
	}
	return failures >= DeviceAttempts, nil
}

// DeviceFailed counts a wrong user code of the browser, in one statement
// (a window past its end starts again at one).
func (s *Store) DeviceFailed(ctx context.Context, userAgentID string, now time.Time) error {
	old := now.Add(-DeviceAttemptWindow)
	_, err := s.DB.Exec(ctx, `INSERT INTO device_attempts (user_agent_id, failures, window_start) VALUES (?, 1, ?)
		ON CONFLICT (user_agent_id) DO UPDATE SET
			failures = CASE WHEN device_attempts.window_start <= ? THEN 1 ELSE device_attempts.failures + 1 END,
			window_start = CASE WHEN device_attempts.window_start <= ? THEN ? ELSE device_attempts.window_start END`,
		userAgentID, now, old, old, now)
	if err != nil {
		return fmt.Errorf("count a device attempt: %w", err)
	}
	return nil
}
