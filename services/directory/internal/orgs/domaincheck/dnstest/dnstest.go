// Package dnstest runs a real DNS server on loopback that answers TXT
// records, for tests of domain validation.
package dnstest

import (
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// Server answers the TXT records set on it; other names are NXDOMAIN.
type Server struct {
	// Addr is its host:port (UDP), for GATEHOUSE_DNS_RESOLVER.
	Addr string
	mu   sync.Mutex
	txt  map[string][]string // lowercased fully qualified name → values
}

// Start runs a server until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{txt: map[string][]string{}}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Addr = pc.LocalAddr().String()
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(s.answer)}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return s
}

func (s *Server) answer(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	s.mu.Lock()
	for _, q := range r.Question {
		if q.Qtype != dns.TypeTXT {
			continue
		}
		for _, v := range s.txt[strings.ToLower(q.Name)] {
			m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 1}, Txt: []string{v}})
		}
	}
	s.mu.Unlock()
	if len(m.Answer) == 0 {
		m.Rcode = dns.RcodeNameError
	}
	_ = w.WriteMsg(m)
}

// Set makes name's TXT records values (none: NXDOMAIN).
func (s *Server) Set(name string, values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.txt[dns.Fqdn(strings.ToLower(name))] = values
}
