package proxy

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/benchcpu"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/edgetest"
)

// The A/B benchmarks of make bench-ab (bench/README, "Hand-made machinery"):
// each runs a hand-made piece (ab=hand) and the plain path it replaces
// (ab=plain) in turn, and -count repeats the pair, so the two are measured
// interleaved in one sitting; cpu-ns/op is the process's CPU per request.
// These two understate their pieces: client, edge's proxy and the service
// share the process and its two cores, so most of the CPU counted is not
// edge's hop. What decides is make bench-compare's distributed run, where
// edge and tokens are counted apart.

// BenchmarkABProxyH1 is h1Transport, the HTTP/1.1 client that does each
// round trip on the request's goroutine (with its MSG_PEEK liveness check
// of an idle connection), against net/http.Transport under the same
// httputil.ReverseProxy.
func BenchmarkABProxyH1(b *testing.B) {
	abProxy(b, func(p *Proxy, hand bool) {
		if !hand {
			usePlainTransport(p)
		}
	})
}

// BenchmarkABProxyReadWhole is a small body read whole and sent with the
// header in one write, against streaming it (both over h1Transport).
func BenchmarkABProxyReadWhole(b *testing.B) {
	abProxy(b, func(p *Proxy, hand bool) {
		if !hand {
			p.whole = 0
		}
	})
}

// introspectionForm is a request of the size make bench's introspection
// sends: a 700-character JWT and the client's credentials.
var introspectionForm = "token=" + strings.Repeat("e", 700) + "&token_type_hint=access_token"

func abProxy(b *testing.B, configure func(p *Proxy, hand bool)) {
	answer := `{"active":true,"sub":"` + strings.Repeat("u", 18) + `","scope":"openid profile","client_id":"` + strings.Repeat("c", 18) + `","exp":1800000000}`
	service := edgetest.Start(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		_, _ = io.WriteString(w, answer)
	}))
	for _, kind := range []string{"post", "get"} {
		for _, arm := range []string{"hand", "plain"} {
			b.Run(kind+"/ab="+arm, func(b *testing.B) {
				p, err := New(service.URL, "tokens", logging.Discard())
				if err != nil {
					b.Fatal(err)
				}
				configure(p, arm == "hand")
				b.Cleanup(p.CloseIdleConnections)
				edge := edgetest.Start(b, p)
				url := edge.URL.String() + "/oauth/v2/introspect"
				b.SetParallelism(8) // 16 clients on 2 cores: make bench's concurrency
				b.ReportAllocs()
				m := benchcpu.Start(b)
				edgetest.Hammer(b, func() *http.Request {
					if kind == "post" {
						req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(introspectionForm))
						req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
						return req
					}
					req, _ := http.NewRequest(http.MethodGet, url, nil)
					return req
				})
				m.Report(b)
			})
		}
	}
}

// usePlainTransport routes p's HTTP/1.1 traffic through its
// net/http.Transport, wrapped as New wraps h1Transport.
func usePlainTransport(p *Proxy) {
	p.sync = nil
	p.breaker = newBreaker(p.svc, byProtocol{h1: p.h1, h2: p.h2}, breakerOpen, p.target.JoinPath("readyz").String(), p.logger)
	p.rp.Transport = telemetry.HTTPTransport(p.breaker, func(r *http.Request) string { return "edge→" + p.svc + " " + r.Method })
}
