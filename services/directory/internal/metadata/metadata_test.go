package metadata_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/metadata"
)

// fieldsOf returns the fields f names, in order.
func fieldsOf(f apierr.Fields) []string {
	out := make([]string, len(f))
	for i, e := range f {
		out[i] = e.Field
	}
	return out
}

func TestChecks(t *testing.T) {
	ok := []byte("v")
	entries := func(n int) []metadata.Entry {
		out := make([]metadata.Entry, n)
		for i := range out {
			out[i] = metadata.Entry{Key: fmt.Sprintf("k%d", i), Value: ok}
		}
		return out
	}
	keys := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("k%d", i)
		}
		return out
	}
	cases := []struct {
		name  string
		check func(*apierr.Fields)
		want  []string // fields named; none = valid
	}{
		{"key of 1 character", func(f *apierr.Fields) { metadata.CheckKey(f, "key", "k") }, nil},
		{"key of 200 characters", func(f *apierr.Fields) { metadata.CheckKey(f, "key", strings.Repeat("k", 200)) }, nil},
		{"key of 200 multi-byte characters", func(f *apierr.Fields) { metadata.CheckKey(f, "key", strings.Repeat("ü", 200)) }, nil},
		{"key of 201 characters", func(f *apierr.Fields) { metadata.CheckKey(f, "key", strings.Repeat("k", 201)) }, []string{"key"}},
		{"empty key", func(f *apierr.Fields) { metadata.CheckKey(f, "key", "") }, []string{"key"}},
		{"blank key", func(f *apierr.Fields) { metadata.CheckKey(f, "key", "  ") }, []string{"key"}},
		{"value of 1 byte", func(f *apierr.Fields) { metadata.CheckValue(f, "value", ok) }, nil},
		{"value of 500000 bytes", func(f *apierr.Fields) { metadata.CheckValue(f, "value", make([]byte, 500000)) }, nil},
		{"value of 500001 bytes", func(f *apierr.Fields) { metadata.CheckValue(f, "value", make([]byte, 500001)) }, []string{"value"}},
		{"empty value", func(f *apierr.Fields) { metadata.CheckValue(f, "value", nil) }, []string{"value"}},
		{"1 entry", func(f *apierr.Fields) { metadata.CheckEntries(f, "metadata", entries(1)) }, nil},
		{"100 entries", func(f *apierr.Fields) { metadata.CheckEntries(f, "metadata", entries(100)) }, nil},
		{"101 entries", func(f *apierr.Fields) { metadata.CheckEntries(f, "metadata", entries(101)) }, []string{"metadata"}},
		{"no entries", func(f *apierr.Fields) { metadata.CheckEntries(f, "metadata", nil) }, []string{"metadata"}},
		{"every bad entry named", func(f *apierr.Fields) {
			metadata.CheckEntries(f, "metadata", []metadata.Entry{{Key: "a", Value: ok}, {Key: "", Value: ok}, {Key: "a", Value: nil}})
		}, []string{"metadata[1].key", "metadata[2].value", "metadata[2].key"}},
		{"1 key", func(f *apierr.Fields) { metadata.CheckKeys(f, "keys", keys(1)) }, nil},
		{"100 keys", func(f *apierr.Fields) { metadata.CheckKeys(f, "keys", keys(100)) }, nil},
		{"101 keys", func(f *apierr.Fields) { metadata.CheckKeys(f, "keys", keys(101)) }, []string{"keys"}},
		{"no keys", func(f *apierr.Fields) { metadata.CheckKeys(f, "keys", nil) }, []string{"keys"}},
		{"repeated keys allowed", func(f *apierr.Fields) { metadata.CheckKeys(f, "keys", []string{"a", "a"}) }, nil},
		{"bad key named", func(f *apierr.Fields) { metadata.CheckKeys(f, "keys", []string{"a", strings.Repeat("k", 201)}) }, []string{"keys[1]"}},
	}
	for _, tc := range cases {
		var f apierr.Fields
		tc.check(&f)
		if got := fieldsOf(f); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: fields %v; want %v", tc.name, got, tc.want)
		}
	}
	// The value limit counts bytes, not characters.
	var f apierr.Fields
	metadata.CheckValue(&f, "value", bytes.Repeat([]byte("ü"), 250001))
	if len(f) != 1 {
		t.Errorf("250001 two-byte characters (500002 bytes) accepted")
	}
}
