package metadata

import (
	"fmt"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
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

// The limits of entries (keys of 200 characters, values of 500000 bytes,
// bulks of 100 entries or keys) are buf.validate rules of the management
// requests, the only way entries come in. The checks below report them
// through the request's limits (apierr.CheckLimits), each field named by
// its path in the request, in order among the other problems of an entry,
// in the words the hand checks had ("must have 1 to 200 characters").
// Commands checks entries again without the limits (lim nil): what is
// not a limit, that keys and values are there and keys distinct.

// CheckKey records in f what is wrong with key: it is required (not all
// white space) and no longer than lim's maximum.
func CheckKey(f *apierr.Fields, lim *apierr.Limits, field, key string) {
	switch {
	case lim != nil:
		f.Check(lim.Length(field, field, key, 1))
	case strings.TrimSpace(key) == "":
		f.Add(field, "is required")
	}
}

// CheckValue records in f what is wrong with value: it is required (not
// empty) and no larger than lim's maximum, in bytes.
func CheckValue(f *apierr.Fields, lim *apierr.Limits, field string, value []byte) {
	switch {
	case len(value) == 0:
		f.Add(field, "is required")
	case lim != nil:
		f.Check(lim.Bytes(field, field))
	}
}

// CheckEntries records in f what is wrong with a bulk of entries named
// field: 1 to lim's maximum of entries, each key and value valid, no key
// twice (which one would win would be an accident of order).
func CheckEntries(f *apierr.Fields, lim *apierr.Limits, field string, entries []Entry) {
	checkCount(f, lim, field, len(entries), "entries")
	seen := make(map[string]bool, len(entries))
	for i, e := range entries {
		name := fmt.Sprintf("%s[%d]", field, i)
		CheckKey(f, lim, name+".key", e.Key)
		CheckValue(f, lim, name+".value", e.Value)
		if seen[e.Key] {
			f.Add(name+".key", "repeats an earlier key")
		}
		seen[e.Key] = true
	}
}

// CheckKeys records in f what is wrong with the keys of a bulk removal
// named field: 1 to lim's maximum of keys, each valid. A key given twice
// is allowed (it is removed once).
func CheckKeys(f *apierr.Fields, lim *apierr.Limits, field string, keys []string) {
	checkCount(f, lim, field, len(keys), "keys")
	for i, k := range keys {
		CheckKey(f, lim, fmt.Sprintf("%s[%d]", field, i), k)
	}
}

// checkCount records a bulk of n noun that is empty, or beyond lim's
// maximum: "must have 1 to 100 entries".
func checkCount(f *apierr.Fields, lim *apierr.Limits, field string, n int, noun string) {
	switch {
	case lim != nil:
		f.Check(lim.Between(field, field, n, 1, noun))
	case n == 0:
		f.Add(field, "must not be empty")
	}
}
