package management_test

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/idps"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
)

// idpSecrets opens IdP client secrets of an mgmttest.Env, whose master key
// is 32 bytes of 42 (GATEHOUSE_MASTER_KEY in mgmttest.Start).
func idpSecrets(t *testing.T) idps.Secrets {
	t.Helper()
	c, err := secrets.NewCipher(bytes.Repeat([]byte{42}, 32), secrets.PurposeIdPSecrets)
	if err != nil {
		t.Fatal(err)
	}
	return idps.Secrets{Cipher: c}
}

// idpStoredSecret returns the decrypted secret of an IdP as stored.
func idpStoredSecret(t *testing.T, e *mgmttest.Env, orgID, id string) string {
	t.Helper()
	p, err := (&idps.Queries{DB: e.DB}).Get(context.Background(), orgID, id)
	if err != nil {
		t.Fatalf("load idp %s: %v", id, err)
	}
	s, err := idpSecrets(t).ClientSecret(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// idpNoPlaintext fails if a stored client secret column or any event
// payload holds one of the plaintext secrets.
func idpNoPlaintext(t *testing.T, e *mgmttest.Env, plain ...string) {
	t.Helper()
	ctx := context.Background()
	var cols [][]byte
	if err := e.DB.Select(ctx, &cols, `SELECT client_secret FROM idps`); err != nil {
		t.Fatal(err)
	}
	var payloads []string
	if err := e.DB.Select(ctx, &payloads, `SELECT payload FROM events`); err != nil {
		t.Fatal(err)
	}
	for _, p := range plain {
		for _, c := range cols {
			if bytes.Contains(c, []byte(p)) {
				t.Fatalf("idps.client_secret holds the plaintext %q", p)
			}
		}
		for _, pl := range payloads {
			if strings.Contains(pl, p) {
				t.Fatalf("an event payload holds the plaintext %q", p)
			}
		}
	}
}

// idpNoSecretIn fails if a response (JSON or binary encoding) contains a
// secret.
func idpNoSecretIn(t *testing.T, what string, m proto.Message, plain ...string) {
	t.Helper()
	js, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plain {
		if bytes.Contains(js, []byte(p)) || bytes.Contains(bin, []byte(p)) {
			t.Fatalf("%s: response contains the client secret", what)
		}
	}
}

// idpWantDetails checks RPC details against events: sequence and change
// date of last, creation date of first, owner.
func idpWantDetails(t *testing.T, what string, d *managementv1.ObjectDetails, first, last eventstore.Event) {
	t.Helper()
	if d.GetSequence() != last.Sequence || !d.GetCreationDate().AsTime().Equal(first.CreatedAt) ||
		!d.GetChangeDate().AsTime().Equal(last.CreatedAt) || d.GetResourceOwner() != last.ResourceOwner {
		t.Fatalf("%s: details = %v; want sequence %d, created %v, changed %v, owner %s",
			what, d, last.Sequence, first.CreatedAt, last.CreatedAt, last.ResourceOwner)
	}
}

// idpWantJSONDetails checks REST details ({"sequence": "n", ...}).
func idpWantJSONDetails(t *testing.T, what string, d map[string]any, first, last eventstore.Event) {
	t.Helper()
	created, err1 := time.Parse(time.RFC3339Nano, idpStr(d["creationDate"]))
	changed, err2 := time.Parse(time.RFC3339Nano, idpStr(d["changeDate"]))
	if err1 != nil || err2 != nil || idpStr(d["sequence"]) != strconv.FormatUint(last.Sequence, 10) ||
		!created.Equal(first.CreatedAt) || !changed.Equal(last.CreatedAt) || d["resourceOwner"] != last.ResourceOwner {
		t.Fatalf("%s: details = %v; want sequence %d, created %v, changed %v, owner %s",
			what, d, last.Sequence, first.CreatedAt, last.CreatedAt, last.ResourceOwner)
	}
}

func idpStr(v any) string { s, _ := v.(string); return s }

func idpObj(v any) map[string]any { m, _ := v.(map[string]any); return m }

// idpEvents returns an IdP's events, failing unless there are n.
func idpEvents(t *testing.T, e *mgmttest.Env, id string, n int) []eventstore.Event {
	t.Helper()
	evs := e.Events(id)
	if len(evs) != n {
		t.Fatalf("idp %s has %d events; want %d", id, len(evs), n)
	}
	return evs
}
