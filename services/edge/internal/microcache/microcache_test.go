package microcache

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// origin answers with what a test sets and counts the requests it sees.
type origin struct {
	calls  atomic.Int64
	mu     sync.Mutex
	status int
	header http.Header
	body   string
	flush  bool
}

func (o *origin) set(status int, body string, kv ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.status, o.body, o.header = status, body, http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		o.header.Add(kv[i], kv[i+1])
	}
}

func (o *origin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := o.calls.Add(1)
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, v := range o.header {
		w.Header()[k] = append([]string(nil), v...)
	}
	w.Header().Set("X-Request-Id", "req-"+strconv.FormatInt(n, 10))
	w.Header().Set("X-Call", strconv.FormatInt(n, 10))
	w.WriteHeader(o.status)
	if o.flush {
		w.(http.Flusher).Flush()
	}
	_, _ = io.WriteString(w, o.body)
}

type fixture struct {
	o   *origin
	c   *Cache
	url string
	now time.Time
	mu  sync.Mutex
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{o: &origin{}, now: time.Unix(1_800_000_000, 0)}
	f.o.set(200, `{"keys":[]}`, "Cache-Control", "public, max-age=60", "Content-Type", "application/json", "Etag", `"v1"`)
	f.c = New(f.o)
	f.c.now = func() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }
	srv := httptest.NewServer(f.c)
	t.Cleanup(srv.Close)
	f.url = srv.URL + "/oauth/v2/keys"
	return f
}

func (f *fixture) advance(d time.Duration) { f.mu.Lock(); f.now = f.now.Add(d); f.mu.Unlock() }

type answer struct {
	status int
	header http.Header
	body   string
}

func (f *fixture) do(t *testing.T, method, url string, kv ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Add(kv[i], kv[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{res.StatusCode, res.Header, string(b)}
}

func TestKeepsPublicResponseForAtMostMaxAge(t *testing.T) {
	f := newFixture(t)
	first := f.do(t, "GET", f.url)
	second := f.do(t, "GET", f.url)
	if got := f.o.calls.Load(); got != 1 {
		t.Fatalf("origin asked %d times; want 1 (the second GET from the cache)", got)
	}
	if second.status != 200 || second.body != first.body || second.header.Get("Etag") != `"v1"` ||
		second.header.Get("Cache-Control") != "public, max-age=60" || second.header.Get("Content-Type") != "application/json" {
		t.Fatalf("cached answer %d %v %q; want the origin's %d %v %q", second.status, second.header, second.body, first.status, first.header, first.body)
	}
	// The request id is each request's own (edge sets it), never a kept one.
	if second.header.Get("X-Request-Id") != "" {
		t.Fatalf("cached answer repeats the first request's id %q", second.header.Get("X-Request-Id"))
	}
	// HEAD is answered from the kept GET, without a body.
	if h := f.do(t, "HEAD", f.url); h.status != 200 || h.body != "" || h.header.Get("Etag") != `"v1"` || f.o.calls.Load() != 1 {
		t.Fatalf("HEAD: %d %q, origin asked %d times; want 200 from the cache", h.status, h.body, f.o.calls.Load())
	}

	// What the origin changes is served once MaxAge has passed, never later.
	f.o.set(200, `{"keys":[{"kid":"new"}]}`, "Cache-Control", "public, max-age=60")
	f.advance(MaxAge - time.Millisecond)
	if a := f.do(t, "GET", f.url); a.body != first.body {
		t.Fatalf("before MaxAge: %q; want the kept %q", a.body, first.body)
	}
	f.advance(time.Millisecond)
	if a := f.do(t, "GET", f.url); a.body != `{"keys":[{"kid":"new"}]}` || f.o.calls.Load() != 2 {
		t.Fatalf("at MaxAge: %q (origin asked %d times); want the origin's new set", a.body, f.o.calls.Load())
	}
}

func TestShorterMaxAgeIsHonoured(t *testing.T) {
	f := newFixture(t)
	f.o.set(200, "x", "Cache-Control", "max-age=0, public")
	f.do(t, "GET", f.url)
	f.do(t, "GET", f.url)
	if got := f.o.calls.Load(); got != 2 {
		t.Fatalf("max-age=0: origin asked %d times; want 2 (never kept)", got)
	}
}

func TestKeepsOnlyWhatAnyCacheMayKeep(t *testing.T) {
	cases := []struct {
		name   string
		status int
		kv     []string
		flush  bool
	}{
		{"no Cache-Control", 200, nil, false},
		{"not public", 200, []string{"Cache-Control", "max-age=60"}, false},
		{"no-store", 200, []string{"Cache-Control", "public, max-age=60, no-store"}, false},
		{"no-cache", 200, []string{"Cache-Control", "public, max-age=60, no-cache"}, false},
		{"private", 200, []string{"Cache-Control", "public, max-age=60", "Cache-Control", "private"}, false},
		{"bad max-age", 200, []string{"Cache-Control", "public, max-age=soon"}, false},
		{"Set-Cookie", 200, []string{"Cache-Control", "public, max-age=60", "Set-Cookie", "a=b"}, false},
		{"Vary", 200, []string{"Cache-Control", "public, max-age=60", "Vary", "Accept-Language"}, false},
		{"not 200", 404, []string{"Cache-Control", "public, max-age=60"}, false},
		{"error", 503, []string{"Cache-Control", "public, max-age=60", "Retry-After", "5"}, false},
		{"flushed stream", 200, []string{"Cache-Control", "public, max-age=60"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.o.set(c.status, "body", c.kv...)
			f.o.flush = c.flush
			a := f.do(t, "GET", f.url)
			b := f.do(t, "GET", f.url)
			if got := f.o.calls.Load(); got != 2 {
				t.Fatalf("origin asked %d times; want 2 (nothing kept)", got)
			}
			if a.status != c.status || b.status != c.status || b.body != "body" || b.header.Get("X-Call") != "2" {
				t.Fatalf("answers %d, %d %q %v; want both the origin's %d", a.status, b.status, b.body, b.header, c.status)
			}
		})
	}
}

func TestTooLargeIsNotKept(t *testing.T) {
	f := newFixture(t)
	big := strings.Repeat("k", maxBody+1)
	f.o.set(200, big, "Cache-Control", "public, max-age=60")
	if a := f.do(t, "GET", f.url); a.body != big {
		t.Fatalf("body of %d bytes; want the origin's %d", len(a.body), len(big))
	}
	f.do(t, "GET", f.url)
	if got := f.o.calls.Load(); got != 2 {
		t.Fatalf("origin asked %d times; want 2", got)
	}
}

func TestConditionalAndNoCacheRequestsReachTheOrigin(t *testing.T) {
	for _, kv := range [][]string{
		{"If-None-Match", `"v1"`},
		{"If-Modified-Since", "Sat, 01 Jan 2000 00:00:00 GMT"},
		{"Range", "bytes=0-3"},
		{"Cache-Control", "no-cache"},
		{"Pragma", "no-cache"},
	} {
		t.Run(kv[0], func(t *testing.T) {
			f := newFixture(t)
			f.do(t, "GET", f.url) // kept
			a := f.do(t, "GET", f.url, kv...)
			if got := f.o.calls.Load(); got != 2 || a.header.Get("X-Call") != "2" {
				t.Fatalf("origin asked %d times; want 2 (%s goes to the origin)", got, kv[0])
			}
		})
	}
}

func TestOtherMethodsAndKeysAreSeparate(t *testing.T) {
	f := newFixture(t)
	f.do(t, "POST", f.url)
	f.do(t, "POST", f.url)
	if got := f.o.calls.Load(); got != 2 {
		t.Fatalf("POST: origin asked %d times; want every POST to reach it", got)
	}
	f.do(t, "GET", f.url+"?a=1")
	f.do(t, "GET", f.url+"?a=1")
	if got := f.o.calls.Load(); got != 4 {
		t.Fatalf("queries: origin asked %d times; want 4 (a request with a query is the origin's)", got)
	}
	// A HEAD before any GET is the origin's to answer, and keeps nothing.
	g := newFixture(t)
	g.do(t, "HEAD", g.url)
	g.do(t, "GET", g.url)
	if got := g.o.calls.Load(); got != 2 {
		t.Fatalf("HEAD then GET: origin asked %d times; want 2", got)
	}
}

// What a client chooses (the query, the Host header) is not in the key:
// no one can empty the cache for everyone by asking for new keys, and
// requests naming other hosts are answered from the same entry.
func TestClientsCannotEmptyTheCache(t *testing.T) {
	f := newFixture(t)
	f.do(t, "GET", f.url)
	for i := range maxEntries + 5 {
		f.do(t, "GET", f.url+"?n="+strconv.Itoa(i))
		req, _ := http.NewRequest(http.MethodGet, f.url, nil)
		req.Host = "h" + strconv.Itoa(i) + ".example"
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	before := f.o.calls.Load()
	f.do(t, "GET", f.url)
	if got := f.o.calls.Load(); got != before {
		t.Fatal("after requests with new queries and hosts, the kept response was gone")
	}
	f.c.entries.CleanUp()
	if n := f.c.entries.EstimatedSize(); n != 1 {
		t.Fatalf("%d entries kept; want 1 (one path)", n)
	}
}

// A burst of distinct paths past the bound evicts cold entries, never
// the whole cache: the path everyone asks for stays kept.
func TestFullCacheKeepsTheHotPath(t *testing.T) {
	f := newFixture(t)
	base := strings.TrimSuffix(f.url, "/oauth/v2/keys")
	for i := range 4 * maxEntries {
		if i%4 == 0 {
			f.do(t, "GET", f.url)
		}
		f.do(t, "GET", base+"/p"+strconv.Itoa(i))
	}
	if got, want := f.o.calls.Load(), int64(1+4*maxEntries); got != want {
		t.Fatalf("origin asked %d times; want %d (the hot path once, each other path once)", got, want)
	}
	f.c.entries.CleanUp()
	if n := f.c.entries.EstimatedSize(); n > maxEntries {
		t.Fatalf("%d entries kept; want at most %d", n, maxEntries)
	}
	before := f.o.calls.Load()
	f.do(t, "GET", f.url)
	if got := f.o.calls.Load(); got != before {
		t.Fatal("after a burst of distinct paths, the hot path's response was gone")
	}
}

// The cached header is shared between answers: a writer that adds to it
// (edge's header writer sets, a handler may add) must not change the kept
// copy.
func TestKeptHeaderIsNotChangedByAnswers(t *testing.T) {
	f := newFixture(t)
	add := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(addingWriter{w}, r)
		})
	}
	srv := httptest.NewServer(add(f.c))
	t.Cleanup(srv.Close)
	for range 3 {
		a := f.do(t, "GET", srv.URL+"/oauth/v2/keys")
		if got := a.header.Values("Cache-Control"); len(got) != 2 {
			t.Fatalf("Cache-Control %q; want the origin's and the one added by this answer", got)
		}
	}
}

type addingWriter struct{ http.ResponseWriter }

func (w addingWriter) WriteHeader(code int) {
	w.Header().Add("Cache-Control", "x-added")
	w.ResponseWriter.WriteHeader(code)
}

func (w addingWriter) Write(b []byte) (int, error) { return w.ResponseWriter.Write(b) }
