// Package authntest holds authn's test helpers: table-backed fakes of the
// directory and tokens internal APIs (real Connect signatures, recording
// the calls authn makes) and a per-dialect database opener.
package authntest
