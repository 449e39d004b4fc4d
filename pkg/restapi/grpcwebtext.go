package restapi

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// maxWebTextBody bounds a base64 request body (edge bounds RPC bodies too).
const maxWebTextBody = 8 << 20

// grpcWebText serves application/grpc-web-text, the base64 form of
// gRPC-Web that browsers without binary streaming send, which vanguard
// and connect-go do not speak: the request body is decoded and passed on
// as application/grpc-web, and the response is encoded back. The
// management API is unary, so the response is encoded whole.
func grpcWebText(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		base, suffix, ok := strings.Cut(strings.ToLower(ct), "application/grpc-web-text")
		if !ok || strings.TrimSpace(base) != "" || r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		raw, err := io.ReadAll(io.LimitReader(r.Body, maxWebTextBody+1))
		if err != nil || len(raw) > maxWebTextBody {
			http.Error(w, "request body too large or unreadable", http.StatusBadRequest)
			return
		}
		// Base64 chunks may each be padded: decode them one by one.
		var body bytes.Buffer
		for s := string(bytes.TrimSpace(raw)); s != ""; {
			n := strings.IndexByte(s, '=')
			chunk := s
			if n >= 0 {
				end := n
				for end < len(s) && s[end] == '=' {
					end++
				}
				chunk, s = s[:end], s[end:]
			} else {
				s = ""
			}
			dec, err := base64.StdEncoding.DecodeString(chunk)
			if err != nil {
				http.Error(w, "request body is not base64", http.StatusBadRequest)
				return
			}
			body.Write(dec)
		}
		r2 := r.Clone(r.Context())
		r2.Body = io.NopCloser(&body)
		r2.ContentLength = int64(body.Len())
		r2.Header.Set("Content-Type", "application/grpc-web"+suffix)
		r2.Header.Del("Content-Length")
		rec := &bufferedResponse{header: http.Header{}}
		next.ServeHTTP(rec, r2)
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		if got := w.Header().Get("Content-Type"); strings.HasPrefix(got, "application/grpc-web") {
			w.Header().Set("Content-Type", "application/grpc-web-text"+strings.TrimPrefix(got, "application/grpc-web"))
		}
		enc := base64.StdEncoding.EncodeToString(rec.body.Bytes())
		w.Header().Set("Content-Length", strconv.Itoa(len(enc)))
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, enc)
	})
}

// bufferedResponse keeps a response to encode it.
type bufferedResponse struct {
	header http.Header
	body   bytes.Buffer
	status int
}

func (b *bufferedResponse) Header() http.Header { return b.header }
func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}
func (b *bufferedResponse) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}
func (b *bufferedResponse) Flush() {}
