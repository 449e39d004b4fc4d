package metadata

import (
	"fmt"
	"time"

	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
)

// Limits of the management API (the proto states them; ZITADEL's as well).
const (
	// MaxKeyLength is the longest key, in characters.
	MaxKeyLength = 200
	// MaxValueBytes is the largest value, in bytes.
	MaxValueBytes = 500000
	// MaxBulk is the most entries (or keys) one bulk request may carry.
	MaxBulk = 100
)

// Entry is a key and the value to store under it.
type Entry struct {
	Key   string
	Value []byte
}

// Metadata is a projected entry with its details.
type Metadata struct {
	UserID       string    `db:"user_id"`
	Key          string    `db:"key"`
	Value        []byte    `db:"value"`
	OrgID        string    `db:"org_id"`
	CreationDate time.Time `db:"creation_date"`
	ChangeDate   time.Time `db:"change_date"`
	Sequence     uint64    `db:"sequence"`
}

// setPayload is the payload of users.EventMetadataSet (the value is base64
// in the JSON).
type setPayload struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// removedPayload is the payload of users.EventMetadataRemoved.
type removedPayload struct {
	Key string `json:"key"`
}

// CheckKey records in f what is wrong with key: it needs 1-200 characters,
// not all of them white space.
func CheckKey(f *apierr.Fields, field, key string) {
	f.Check(apierr.Length(field, key, 1, MaxKeyLength))
}

// CheckValue records in f what is wrong with value: it needs 1-500000 bytes.
func CheckValue(f *apierr.Fields, field string, value []byte) {
	switch {
	case len(value) == 0:
		f.Add(field, "is required")
	case len(value) > MaxValueBytes:
		f.Add(field, fmt.Sprintf("must have at most %d bytes", MaxValueBytes))
	}
}

// CheckEntries records in f what is wrong with a bulk of entries named
// field: 1-100 entries, each key and value valid, no key twice (which one
// would win would be an accident of order).
func CheckEntries(f *apierr.Fields, field string, entries []Entry) {
	if n := len(entries); n == 0 || n > MaxBulk {
		f.Add(field, fmt.Sprintf("must have 1 to %d entries", MaxBulk))
	}
	seen := make(map[string]bool, len(entries))
	for i, e := range entries {
		name := fmt.Sprintf("%s[%d]", field, i)
		CheckKey(f, name+".key", e.Key)
		CheckValue(f, name+".value", e.Value)
		if seen[e.Key] {
			f.Add(name+".key", "repeats an earlier key")
		}
		seen[e.Key] = true
	}
}

// CheckKeys records in f what is wrong with the keys of a bulk removal
// named field: 1-100 keys, each valid. A key given twice is allowed (it is
// removed once).
func CheckKeys(f *apierr.Fields, field string, keys []string) {
	if n := len(keys); n == 0 || n > MaxBulk {
		f.Add(field, fmt.Sprintf("must have 1 to %d keys", MaxBulk))
	}
	for i, k := range keys {
		CheckKey(f, fmt.Sprintf("%s[%d]", field, i), k)
	}
}
