package keys_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys/keytest"
)

// Edits FuzzVerify applies to a valid token.
const (
	editOverwrite = iota // write the bytes over the token at the offset
	editInsert           // insert them at the offset
	editDelete           // delete as many bytes as given at the offset
	editReplace          // the bytes are the whole token
	editCount
)

// FuzzVerify: Verify never panics, refuses everything with
// ErrInvalidToken, and accepts a token only when it is exactly one that
// a key of ours signed — whatever is written over, inserted into or cut
// out of a valid token of each algorithm, or given instead of it. An
// accepted token also verifies with jwx against the published key set,
// with the same payload.
func FuzzVerify(f *testing.F) {
	type signed struct {
		v      verifiers
		token  string
		claims []byte
	}
	claims := differentialClaims[4]
	var tokens []signed
	for _, alg := range keys.Algorithms {
		m := keytest.Manager(f, keytest.Open(f, keytest.DBOptions(f, db.SQLite)), keytest.Options(alg, nil))
		tok, err := m.Sign(claims)
		if err != nil {
			f.Fatal(err)
		}
		set := publishedSet(f, m)
		tokens = append(tokens, signed{v: verifiers{m: m, set: set}, token: tok, claims: claims})
	}
	for alg := range uint8(len(keys.Algorithms)) {
		f.Add(alg, uint8(editOverwrite), uint16(0), []byte{})                         // the valid token
		f.Add(alg, uint8(editOverwrite), uint16(5), []byte("A"))                      // header
		f.Add(alg, uint8(editOverwrite), uint16(200), []byte("_"))                    // payload
		f.Add(alg, uint8(editOverwrite), uint16(0xffff), []byte("Q"))                 // last character
		f.Add(alg, uint8(editInsert), uint16(0xffff), []byte("="))                    // padding
		f.Add(alg, uint8(editInsert), uint16(0xffff), []byte(".x"))                   // a fourth part
		f.Add(alg, uint8(editDelete), uint16(0xfff0), []byte("0123456789"))           // truncated signature
		f.Add(alg, uint8(editReplace), uint16(0), []byte("eyJhbGciOiJub25lIn0.e30.")) // alg none
	}
	f.Add(uint8(0), uint8(editReplace), uint16(0), []byte(""))
	f.Add(uint8(0), uint8(editReplace), uint16(0), []byte(".."))
	f.Add(uint8(0), uint8(editReplace), uint16(0), []byte("e30.e30.e30"))
	f.Fuzz(func(t *testing.T, alg, op uint8, at uint16, data []byte) {
		s := tokens[int(alg)%len(tokens)]
		tok := edit(s.token, op, int(at), data)
		got, err := s.v.ours(tok)
		if tok == s.token {
			if err != nil || !bytes.Equal(got, s.claims) {
				t.Fatalf("the valid token: got %q, %v", got, err)
			}
			if got, err := s.v.jwx(tok); err != nil || !bytes.Equal(got, s.claims) {
				t.Fatalf("the valid token with jwx: got %q, %v", got, err)
			}
			return
		}
		if err == nil {
			t.Fatalf("accepted a token no key of ours signed: %q (payload %q)", tok, got)
		}
		if !errors.Is(err, keys.ErrInvalidToken) {
			t.Fatalf("got %v; want ErrInvalidToken", err)
		}
	})
}

// edit applies op to tok at offset at (modulo the token's length + 1).
func edit(tok string, op uint8, at int, data []byte) string {
	at %= len(tok) + 1
	switch op % editCount {
	case editOverwrite:
		b := []byte(tok)
		copy(b[at:], data)
		return string(b)
	case editInsert:
		return tok[:at] + string(data) + tok[at:]
	case editDelete:
		end := min(at+len(data), len(tok))
		return tok[:at] + tok[end:]
	default:
		return string(data)
	}
}
