// Package webauthntest is a software WebAuthn authenticator for tests: it
// answers the creation and request options a relying party sends (the
// JSON of navigator.credentials.create and get) with attestation "none"
// and ES256 signatures, as a browser with a platform authenticator would.
// Every field can be spoiled on purpose (origin, counter, user handle) to
// test what the relying party refuses.
package webauthntest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"
)

// Authenticator flags (WebAuthn §6.1).
const (
	flagUP = 0x01 // user present
	flagUV = 0x04 // user verified
	flagAT = 0x40 // attested credential data included
)

var b64 = base64.RawURLEncoding

// Authenticator holds credentials and signs for one origin.
type Authenticator struct {
	// Origin is what the client data says the page's origin was.
	Origin string
	// UV: the authenticator verifies the user (PIN, biometrics).
	UV bool
}

// Credential is a key pair the authenticator made for a relying party.
type Credential struct {
	ID         []byte
	Key        *ecdsa.PrivateKey
	RPID       string
	UserHandle []byte
	// Counter is the signature counter; each assertion adds one first
	// (leave it 0 and set Fixed for authenticators that never count).
	Counter uint32
	Fixed   bool
}

type creationOptions struct {
	PublicKey struct {
		Challenge string `json:"challenge"`
		RP        struct {
			ID string `json:"id"`
		} `json:"rp"`
		User struct {
			ID string `json:"id"`
		} `json:"user"`
	} `json:"publicKey"`
}

type requestOptions struct {
	PublicKey struct {
		Challenge string `json:"challenge"`
		RPID      string `json:"rpId"`
	} `json:"publicKey"`
}

// Create answers creation options (the relying party's JSON, with or
// without the publicKey wrapper's content) with a new credential: the
// PublicKeyCredential JSON to send back, and the credential.
func (a *Authenticator) Create(options []byte) ([]byte, *Credential, error) {
	var o creationOptions
	if err := json.Unmarshal(options, &o); err != nil {
		return nil, nil, fmt.Errorf("webauthntest: creation options: %w", err)
	}
	if o.PublicKey.Challenge == "" || o.PublicKey.RP.ID == "" {
		return nil, nil, errors.New("webauthntest: creation options lack challenge or rp.id")
	}
	user, err := b64.DecodeString(o.PublicKey.User.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("webauthntest: user.id: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	id := make([]byte, 32)
	_, _ = rand.Read(id)
	cred := &Credential{ID: id, Key: key, RPID: o.PublicKey.RP.ID, UserHandle: user}
	cose, err := coseKey(&key.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	auth := a.authData(cred.RPID, flagAT, 0)
	auth = append(auth, make([]byte, 16)...) // AAGUID: none
	auth = binary.BigEndian.AppendUint16(auth, uint16(len(id)))
	auth = append(auth, id...)
	auth = append(auth, cose...)
	att, err := cbor.Marshal(map[string]any{"fmt": "none", "attStmt": map[string]any{}, "authData": auth})
	if err != nil {
		return nil, nil, err
	}
	client := a.clientData("webauthn.create", o.PublicKey.Challenge)
	out, err := json.Marshal(map[string]any{
		"id": b64.EncodeToString(id), "rawId": b64.EncodeToString(id), "type": "public-key",
		"response": map[string]any{"clientDataJSON": b64.EncodeToString(client), "attestationObject": b64.EncodeToString(att)},
	})
	return out, cred, err
}

// Get answers request options with an assertion by cred.
func (a *Authenticator) Get(options []byte, cred *Credential) ([]byte, error) {
	var o requestOptions
	if err := json.Unmarshal(options, &o); err != nil {
		return nil, fmt.Errorf("webauthntest: request options: %w", err)
	}
	if o.PublicKey.Challenge == "" {
		return nil, errors.New("webauthntest: request options lack a challenge")
	}
	rpID := o.PublicKey.RPID
	if rpID == "" {
		rpID = cred.RPID
	}
	if !cred.Fixed {
		cred.Counter++
	}
	auth := a.authData(rpID, 0, cred.Counter)
	client := a.clientData("webauthn.get", o.PublicKey.Challenge)
	sum := sha256.Sum256(client)
	digest := sha256.Sum256(append(append([]byte{}, auth...), sum[:]...))
	sig, err := ecdsa.SignASN1(rand.Reader, cred.Key, digest[:])
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{
		"id": b64.EncodeToString(cred.ID), "rawId": b64.EncodeToString(cred.ID), "type": "public-key",
		"response": map[string]any{"clientDataJSON": b64.EncodeToString(client), "authenticatorData": b64.EncodeToString(auth),
			"signature": b64.EncodeToString(sig), "userHandle": b64.EncodeToString(cred.UserHandle)},
	})
}

func (a *Authenticator) authData(rpID string, flags byte, counter uint32) []byte {
	h := sha256.Sum256([]byte(rpID))
	flags |= flagUP
	if a.UV {
		flags |= flagUV
	}
	out := append(h[:], flags)
	return binary.BigEndian.AppendUint32(out, counter)
}

func (a *Authenticator) clientData(typ, challenge string) []byte {
	b, _ := json.Marshal(map[string]any{"type": typ, "challenge": challenge, "origin": a.Origin, "crossOrigin": false})
	return b
}

// coseKey is an EC2 P-256 public key for ES256 (RFC 9053).
func coseKey(k *ecdsa.PublicKey) ([]byte, error) {
	raw, err := k.Bytes() // uncompressed point: 0x04 | x | y
	if err != nil {
		return nil, err
	}
	return cbor.Marshal(map[int]any{1: 2, 3: -7, -1: 1, -2: raw[1:33], -3: raw[33:65]})
}
