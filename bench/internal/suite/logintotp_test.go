package suite

import (
	"testing"
	"time"
)

// A user gives the code of each step the server accepts and it has not
// used once, then none until time moves on.
func TestTOTPUsersGiveEachStepOnce(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000*totpPeriod+5, 0)
	p := &totpUsers{clock: func() time.Time { return now }}
	p.put(&totpUser{TOTPPerson: TOTPPerson{Secret: "JBSWY3DPEHPK3PXP"}, last: 1000}) // enrolled in this step
	take := func(want int64) {
		t.Helper()
		u, code, err := p.take()
		if err != nil || u.last != want || len(code) != 6 {
			t.Fatalf("take: step %v, code %q, %v; want step %d", u, code, err, want)
		}
		p.put(u)
	}
	none := func() {
		t.Helper()
		if u, _, err := p.take(); err == nil {
			t.Fatalf("take gave step %d beyond the skew", u.last)
		}
	}
	take(1001) // 1000 was the enrollment's; 1001 is the next the skew allows
	none()
	now = now.Add(2 * totpPeriod * time.Second) // step 1002
	take(1002)
	take(1003)
	none()
}
