package management_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
)

// route is one REST binding of a management RPC.
type route struct {
	method, path string
	body         bool
}

// managementAPI returns the ManagementService descriptor and its REST
// routes, with each {variable} filled by fill(name).
func managementAPI(fill func(string) string) (protoreflect.ServiceDescriptor, []route) {
	sd := managementv1.File_gatehouse_management_v1_management_proto.Services().ByName("ManagementService")
	var out []route
	for i := 0; i < sd.Methods().Len(); i++ {
		rule, _ := proto.GetExtension(sd.Methods().Get(i).Options(), annotations.E_Http).(*annotations.HttpRule)
		for _, r := range append([]*annotations.HttpRule{rule}, rule.GetAdditionalBindings()...) {
			var method, tmpl string
			switch {
			case r.GetGet() != "":
				method, tmpl = http.MethodGet, r.GetGet()
			case r.GetPost() != "":
				method, tmpl = http.MethodPost, r.GetPost()
			case r.GetPut() != "":
				method, tmpl = http.MethodPut, r.GetPut()
			case r.GetPatch() != "":
				method, tmpl = http.MethodPatch, r.GetPatch()
			case r.GetDelete() != "":
				method, tmpl = http.MethodDelete, r.GetDelete()
			default:
				continue
			}
			segs := strings.Split(tmpl, "/")
			for j, s := range segs {
				if name, ok := strings.CutPrefix(s, "{"); ok {
					segs[j] = fill(strings.TrimSuffix(name, "}"))
				}
			}
			out = append(out, route{method: method, path: strings.Join(segs, "/"), body: r.GetBody() != ""})
		}
	}
	return sd, out
}

// fuzzEnv is the directory service on SQLite with an IAM owner's token,
// and a filler of path variables with the ids of a second organization
// and of another user of the owner's: the fuzzer may deactivate or
// remove those, while the owner (whose token every call would lose with
// it) stays unnamed.
func fuzzEnv(f *testing.F) (*mgmttest.Env, func(string) string) {
	e := mgmttest.Start(f, db.SQLite)
	org, _ := e.SeedOrg("Fuzz Org", "fuzz-owner")
	user := e.SeedUser(e.OrgID, "fuzz-user")
	return e, func(name string) string {
		switch {
		case strings.Contains(name, "org"):
			return org
		case strings.Contains(name, "user") || name == "id":
			return user
		}
		return "x"
	}
}

// fuzzMethods are the methods FuzzManagementREST picks from (by a byte,
// so the fuzzer explores them all); the last stands for any other token.
var fuzzMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
	http.MethodHead, http.MethodOptions, "PROPFIND"}

// FuzzManagementREST: the REST transcoding of the management API
// (vanguard through pkg/restapi, the authorization interceptor, the
// handlers, SQLite) answers any method, path, query and body, with or
// without an IAM owner's token, with a status below 500, and every error
// as google.rpc.Status JSON. The seeds are every REST route with ids that
// exist, with and without a JSON body.
func FuzzManagementREST(f *testing.F) {
	e, fill := fuzzEnv(f)
	_, routes := managementAPI(fill)
	for _, r := range routes {
		m := uint8(0)
		for i, name := range fuzzMethods {
			if name == r.method {
				m = uint8(i)
			}
		}
		body := []byte(nil)
		if r.body {
			body = []byte(`{}`)
		}
		f.Add(m, r.path, body, true)
	}
	f.Add(uint8(1), "/management/v1/users/_search", []byte(`{"queries":[{"userNameQuery":{"userName":"a","method":"TEXT_QUERY_METHOD_CONTAINS_IGNORE_CASE"}}]}`), true)
	f.Add(uint8(1), "/management/v1/users/human", []byte(`{"userName":"x","profile":{"firstName":"é"},"email":{"email":"x@example.com"}}`), true)
	f.Add(uint8(1), "/management/v1/users/human", []byte(`{"userName":`), true)
	f.Add(uint8(0), "/management/v1/users/a%2Fb%25", []byte(nil), true)
	f.Add(uint8(0), "/management/v1/users/%ff", []byte(nil), true)
	f.Add(uint8(0), "/management/v1/orgs/me?x=1&x=2", []byte(`{"a":1}`), false)
	f.Add(uint8(7), "/management/v1/orgs/me", []byte(nil), true)
	f.Fuzz(func(t *testing.T, m uint8, target string, body []byte, withToken bool) {
		method := fuzzMethods[int(m)%len(fuzzMethods)]
		if !strings.HasPrefix(target, "/") || strings.ContainsAny(target, " \t\r\n#") {
			return // not a request target a client can send
		}
		r, err := http.NewRequest(method, "http://directory.test"+target, bytes.NewReader(body))
		if err != nil {
			return
		}
		r.RequestURI = target
		if len(body) > 0 {
			r.Header.Set("Content-Type", "application/json")
		}
		if withToken {
			r.Header.Set("Authorization", "Bearer "+e.AdminToken)
		}
		w := httptest.NewRecorder()
		e.Handler.ServeHTTP(w, r)
		res := w.Result()
		if os.Getenv("FUZZ_LOG") != "" {
			t.Logf("STATUS %d %s %s %.100s", res.StatusCode, method, target, w.Body.Bytes())
		}
		if res.StatusCode >= 500 {
			t.Fatalf("%s %s %q: %d %s", method, target, body, res.StatusCode, w.Body.Bytes())
		}
		if res.StatusCode >= 400 && method != http.MethodHead && strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") &&
			!bytes.Contains(w.Body.Bytes(), []byte(`"code"`)) {
			t.Fatalf("%s %s: %d with a JSON body that is no google.rpc.Status: %s", method, target, res.StatusCode, w.Body.Bytes())
		}
	})
}

// FuzzManagementGRPCWeb: the gRPC-web framing of the management API
// (connect-go behind vanguard) answers any body — well framed or not,
// binary or base64 text — to any procedure, with or without a token,
// with HTTP 200 and a grpc-status, or a 4xx for a body it cannot read;
// never a 5xx, never Unknown, and Internal only for a body that is not
// one well-formed uncompressed envelope (connect-go answers a broken
// framing — truncated, compressed without compression, with end-of-stream
// flags, trailing bytes — with Internal, gRPC's code for a protocol
// error), never for a well-framed request, whatever its message holds.
func FuzzManagementGRPCWeb(f *testing.F) {
	e, fill := fuzzEnv(f)
	sd, _ := managementAPI(fill)
	procs := make([]string, sd.Methods().Len())
	for i := range procs {
		procs[i] = "/" + string(sd.FullName()) + "/" + string(sd.Methods().Get(i).Name())
	}
	getUser, _ := proto.Marshal(&managementv1.GetUserByIDRequest{Id: fill("id")})
	for i := range procs {
		f.Add(uint8(i), uint8(0), true, []byte{})
	}
	f.Add(uint8(0), uint8(0), true, getUser)
	f.Add(uint8(0), uint8(1), true, getUser)
	f.Add(uint8(0), uint8(0), false, []byte{0, 0, 0, 0, 5, 1})
	f.Add(uint8(0), uint8(0), false, []byte{0x80, 0, 0, 0, 0})
	f.Add(uint8(0), uint8(0), false, []byte{1, 0, 0, 0, 2, 0x1f, 0x8b})
	f.Add(uint8(0), uint8(0), false, []byte{0, 0xff, 0xff, 0xff, 0xff})
	f.Add(uint8(0), uint8(2), false, []byte("AAAAAAA="))
	f.Fuzz(func(t *testing.T, proc, mode uint8, frame bool, msg []byte) {
		path := procs[int(proc)%len(procs)]
		body := msg
		if frame {
			body = make([]byte, 5+len(msg))
			binary.BigEndian.PutUint32(body[1:5], uint32(len(msg)))
			copy(body[5:], msg)
		}
		ct := "application/grpc-web+proto"
		switch mode % 4 {
		case 1:
			ct = "application/grpc-web-text+proto"
			body = []byte(base64.StdEncoding.EncodeToString(body))
		case 2:
			ct = "application/grpc-web-text" // the fuzzer's bytes as text, valid base64 or not
		case 3:
			ct = "application/grpc-web+json"
		}
		r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		r.Header.Set("Content-Type", ct)
		r.Header.Set("X-Grpc-Web", "1")
		if mode&4 == 0 {
			r.Header.Set("Authorization", "Bearer "+e.AdminToken)
		}
		w := httptest.NewRecorder()
		e.Handler.ServeHTTP(w, r)
		res := w.Result()
		if res.StatusCode >= 500 {
			t.Fatalf("%s %s %x: HTTP %d %s", path, ct, body, res.StatusCode, w.Body.Bytes())
		}
		if res.StatusCode != http.StatusOK {
			return
		}
		status, message := grpcWebStatus(t, res, strings.HasPrefix(ct, "application/grpc-web-text"))
		if status == "" {
			t.Fatalf("%s %s %x: no grpc-status", path, ct, body)
		}
		code, _ := strconv.Atoi(status)
		if code == 2 || (code == 13 && wellFramed(body, strings.HasPrefix(ct, "application/grpc-web-text"))) {
			t.Fatalf("%s %s %x: grpc-status %s (%s)", path, ct, body, status, message)
		}
	})
}

// wellFramed reports whether a gRPC-web request body (base64 for the
// text variant) is exactly one envelope with no flags.
func wellFramed(body []byte, text bool) bool {
	if text {
		var err error
		if body, err = base64.StdEncoding.DecodeString(string(body)); err != nil {
			return false
		}
	}
	return len(body) >= 5 && body[0] == 0 && uint64(binary.BigEndian.Uint32(body[1:5])) == uint64(len(body)-5)
}

// grpcWebStatus finds grpc-status and grpc-message (percent-decoded) in
// the headers (a trailers-only answer) or in the trailer frame at the
// end of the body.
func grpcWebStatus(t *testing.T, res *http.Response, text bool) (status, message string) {
	t.Helper()
	if s := res.Header.Get("Grpc-Status"); s != "" {
		m, _ := url.PathUnescape(res.Header.Get("Grpc-Message"))
		return s, m
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if text {
		if b, err = base64.StdEncoding.DecodeString(string(b)); err != nil {
			t.Fatalf("grpc-web-text answer is not base64: %v", err)
		}
	}
	for len(b) >= 5 {
		flags, n := b[0], binary.BigEndian.Uint32(b[1:5])
		if uint64(len(b)-5) < uint64(n) {
			t.Fatalf("truncated frame in the answer")
		}
		payload := b[5 : 5+n]
		b = b[5+n:]
		if flags&0x80 == 0 {
			continue
		}
		for _, line := range strings.Split(string(payload), "\r\n") {
			k, v, _ := strings.Cut(line, ":")
			switch strings.ToLower(strings.TrimSpace(k)) {
			case "grpc-status":
				status = strings.TrimSpace(v)
			case "grpc-message":
				message, _ = url.PathUnescape(strings.TrimSpace(v))
			}
		}
		return status, message
	}
	return "", ""
}
