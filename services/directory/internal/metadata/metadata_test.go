package metadata_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/metadata"
)

// The rules of entries that are not limits, checked as Commands checks
// them (no limits), and the limits as the management API's handlers check
// them: from the request's proto (keys 200 characters, values 500000
// bytes, bulks 100), named and ordered among the other problems.
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
	// bulk is the limits of a BulkSetUserMetadataRequest carrying es;
	// removal those of a BulkRemoveUserMetadataRequest carrying ks.
	limits := func(m proto.Message) *apierr.Limits {
		t.Helper()
		l, err := apierr.CheckLimits(m)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	bulk := func(es []metadata.Entry) *apierr.Limits {
		m := &managementv1.BulkSetUserMetadataRequest{Id: "u"}
		for _, e := range es {
			m.Metadata = append(m.Metadata, &managementv1.BulkSetUserMetadataRequest_Metadata{Key: e.Key, Value: e.Value})
		}
		return limits(m)
	}
	removal := func(ks []string) *apierr.Limits {
		return limits(&managementv1.BulkRemoveUserMetadataRequest{Id: "u", Keys: ks})
	}
	checkEntries := func(es []metadata.Entry) func(*apierr.Fields) {
		return func(f *apierr.Fields) { metadata.CheckEntries(f, bulk(es), "metadata", es) }
	}
	checkKeys := func(ks []string) func(*apierr.Fields) {
		return func(f *apierr.Fields) { metadata.CheckKeys(f, removal(ks), "keys", ks) }
	}
	long := strings.Repeat
	cases := []struct {
		name  string
		check func(*apierr.Fields)
		want  []string // "field message"s; none = valid
	}{
		// Without limits (Commands): what is not one.
		{"key of 1 character", func(f *apierr.Fields) { metadata.CheckKey(f, nil, "key", "k") }, nil},
		{"empty key", func(f *apierr.Fields) { metadata.CheckKey(f, nil, "key", "") }, []string{"key is required"}},
		{"blank key", func(f *apierr.Fields) { metadata.CheckKey(f, nil, "key", "  ") }, []string{"key is required"}},
		{"value of 1 byte", func(f *apierr.Fields) { metadata.CheckValue(f, nil, "value", ok) }, nil},
		{"empty value", func(f *apierr.Fields) { metadata.CheckValue(f, nil, "value", nil) }, []string{"value is required"}},
		{"1 entry", func(f *apierr.Fields) { metadata.CheckEntries(f, nil, "metadata", entries(1)) }, nil},
		{"no entries", func(f *apierr.Fields) { metadata.CheckEntries(f, nil, "metadata", nil) }, []string{"metadata must not be empty"}},
		{"every bad entry named", func(f *apierr.Fields) {
			metadata.CheckEntries(f, nil, "metadata", []metadata.Entry{{Key: "a", Value: ok}, {Key: "", Value: ok}, {Key: "a", Value: nil}})
		}, []string{"metadata[1].key is required", "metadata[2].value is required", "metadata[2].key repeats an earlier key"}},
		{"1 key", func(f *apierr.Fields) { metadata.CheckKeys(f, nil, "keys", keys(1)) }, nil},
		{"no keys", func(f *apierr.Fields) { metadata.CheckKeys(f, nil, "keys", nil) }, []string{"keys must not be empty"}},
		{"repeated keys allowed", func(f *apierr.Fields) { metadata.CheckKeys(f, nil, "keys", []string{"a", "a"}) }, nil},

		// With the limits of the request's proto.
		{"100 entries", checkEntries(entries(100)), nil},
		{"101 entries", checkEntries(entries(101)), []string{"metadata must have 1 to 100 entries"}},
		{"no entries, limits known", checkEntries(nil), []string{"metadata must have 1 to 100 entries"}},
		{"keys of 200 multi-byte characters", checkEntries([]metadata.Entry{{Key: long("ü", 200), Value: ok}}), nil},
		{"every bad entry named, limits among them", checkEntries([]metadata.Entry{
			{Key: long("k", 201), Value: make([]byte, 500001)}, {Key: "", Value: ok}, {Key: "b", Value: make([]byte, 500000)}, {Key: "b", Value: nil}}),
			[]string{"metadata[0].key must have 1 to 200 characters", "metadata[0].value must have at most 500000 bytes",
				"metadata[1].key is required", "metadata[3].value is required", "metadata[3].key repeats an earlier key"}},
		{"100 keys", checkKeys(keys(100)), nil},
		{"101 keys", checkKeys(keys(101)), []string{"keys must have 1 to 100 keys"}},
		{"bad key named", checkKeys([]string{"a", long("k", 201), " "}),
			[]string{"keys[1] must have 1 to 200 characters", "keys[2] is required"}},
	}
	for _, tc := range cases {
		var f apierr.Fields
		tc.check(&f)
		var got []string
		for _, e := range f {
			got = append(got, e.Error())
		}
		if strings.Join(got, "; ") != strings.Join(tc.want, "; ") {
			t.Errorf("%s: %q; want %q", tc.name, got, tc.want)
		}
	}
	// The value limit counts bytes, not characters.
	v := bytes.Repeat([]byte("ü"), 250001)
	var f apierr.Fields
	metadata.CheckValue(&f, limits(&managementv1.SetUserMetadataRequest{Id: "u", Key: "k", Value: v}), "value", v)
	if len(f) != 1 {
		t.Errorf("250001 two-byte characters (500002 bytes) accepted")
	}
}
