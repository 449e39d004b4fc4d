package form

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
)

// Decode fills the string fields of the struct dst points to from values,
// by their `form:"name"` tags; a tag `form:"name,required"` makes an absent
// or empty parameter invalid_request ("name is required"). Fields are
// checked in declaration order, so the first missing one is named, always
// the same. Parameters without a field are ignored (RFC 6749 §3.2: the
// server ignores unrecognised request parameters).
func Decode(values map[string]string, dst any) error {
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("form.Decode: %T is not a pointer to a struct", dst))
	}
	v = v.Elem()
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup("form")
		if !ok {
			continue
		}
		if f.Type.Kind() != reflect.String {
			panic(fmt.Sprintf("form.Decode: field %s of %s is not a string", f.Name, t))
		}
		name, opt, _ := strings.Cut(tag, ",")
		val := values[name]
		if val == "" && opt == "required" {
			return oauth.New(oauth.InvalidRequest, "%s is required", name)
		}
		v.Field(i).SetString(val)
	}
	return nil
}
