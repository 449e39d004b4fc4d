// Package lockout owns login_failures: the durable counters of failed
// password checks that slow down and refuse password guessing, per
// (account, client address), per client address and, where an
// organization opts in, per account. It decides when an attempt may check
// a password; callers answer a refused attempt exactly like a wrong
// password, so the counters tell an attacker nothing about which accounts
// exist. It depends only on pkg/db; internalapi counts through it, the
// users reducer of UnlockUser forgets a user's counters (ForgetAccount),
// and the directory service prunes old counters in the background.
package lockout
