package keys

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/asn1"
	"math/big"
	"testing"
)

// rawECDSA turns valid DER signatures into r||s, each left-padded to 32
// bytes, and refuses anything else.
func TestRawECDSA(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	d := sha256.Sum256([]byte("x"))
	for range 50 {
		der, err := ecdsa.SignASN1(rand.Reader, k, d[:])
		if err != nil {
			t.Fatal(err)
		}
		raw, err := rawECDSA(der)
		if err != nil || len(raw) != 64 {
			t.Fatalf("rawECDSA(%x) = %x, %v", der, raw, err)
		}
		r, s := new(big.Int).SetBytes(raw[:32]), new(big.Int).SetBytes(raw[32:])
		if !ecdsa.Verify(&k.PublicKey, d[:], r, s) {
			t.Fatalf("r||s %x does not verify", raw)
		}
	}
	small, _ := asn1.Marshal(struct{ R, S *big.Int }{big.NewInt(1), big.NewInt(258)})
	if raw, err := rawECDSA(small); err != nil || !bytes.Equal(raw, append(append(make([]byte, 31), 1), append(make([]byte, 30), 1, 2)...)) {
		t.Fatalf("rawECDSA(small) = %x, %v; want left-padded r and s", raw, err)
	}
	valid, _ := asn1.Marshal(struct{ R, S *big.Int }{big.NewInt(7), big.NewInt(9)})
	for name, der := range map[string][]byte{
		"empty":         {},
		"trailing data": append(append([]byte{}, valid...), 0),
		"negative r":    mustDER(t, big.NewInt(-7), big.NewInt(9)),
		"zero s":        mustDER(t, big.NewInt(7), big.NewInt(0)),
		"r too long":    mustDER(t, new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(9)),
		"one integer":   mustDER1(t, big.NewInt(7)),
		"not minimal":   {0x30, 0x07, 0x02, 0x02, 0x00, 0x07, 0x02, 0x01, 0x09},
	} {
		if raw, err := rawECDSA(der); err == nil {
			t.Errorf("%s: rawECDSA(%x) = %x; want an error", name, der, raw)
		}
	}
}

func mustDER(t *testing.T, r, s *big.Int) []byte {
	t.Helper()
	b, err := asn1.Marshal(struct{ R, S *big.Int }{r, s})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustDER1(t *testing.T, r *big.Int) []byte {
	t.Helper()
	b, err := asn1.Marshal(struct{ R *big.Int }{r})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func BenchmarkRawECDSA(b *testing.B) {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	d := sha256.Sum256([]byte("x"))
	der, _ := ecdsa.SignASN1(rand.Reader, k, d[:])
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rawECDSA(der); err != nil {
			b.Fatal(err)
		}
	}
}
