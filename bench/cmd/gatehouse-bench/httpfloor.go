package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/gatehouse-id/gatehouse/bench/internal/floor"
	"github.com/gatehouse-id/gatehouse/bench/internal/launch"
	"github.com/gatehouse-id/gatehouse/bench/internal/load"
	"github.com/gatehouse-id/gatehouse/bench/internal/procstat"
)

// floorFlag runs this binary as the bare HTTP server of the floor;
// proxyFloorFlag as a bare reverse proxy in front of one.
const (
	floorFlag      = "-serve-http-floor"
	proxyFloorFlag = "-serve-proxy-floor"
)

// floorForm is a POST body of about an introspection request's size.
var floorForm = "token=" + strings.Repeat("t", 700) + "&token_type_hint=access_token"

// serveFloor answers every request with the header fields and a body of
// the size of Gatehouse's key set: the least any Go HTTP server does per
// request (parse it, read its body, write that response), for comparison
// with Gatehouse's figures.
func serveFloor(addr string) int {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h := w.Header()
		for _, kv := range floor.KeySetHeaders {
			h[kv[0]] = []string{kv[1]}
		}
		_, _ = w.Write(floor.KeySetBody)
	})
	if err := http.ListenAndServe(addr, h); err != nil {
		fmt.Fprintf(os.Stderr, "gatehouse-bench %s: %v\n", floorFlag, err)
		return 1
	}
	return 0
}

// serveProxyFloor forwards every request to upstream with the standard
// library's reverse proxy and transport, keep-alive as edge's: what any Go
// proxy pays per request, for comparison with edge's own CPU.
func serveProxyFloor(addr, upstream string) int {
	u, err := url.Parse("http://" + upstream)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gatehouse-bench %s: %v\n", proxyFloorFlag, err)
		return 1
	}
	p := httputil.NewSingleHostReverseProxy(u)
	p.Transport = &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second}
	if err := http.ListenAndServe(addr, p); err != nil {
		fmt.Fprintf(os.Stderr, "gatehouse-bench %s: %v\n", proxyFloorFlag, err)
		return 1
	}
	return 0
}

// httpFloors measures, in child processes and with the load client and
// settings of the scenarios, the server CPU per GET of serveFloor, and the
// proxy's CPU per POST of serveProxyFloor in front of another serveFloor.
func (b *bench) httpFloors(ctx context.Context) (server, proxy time.Duration, err error) {
	srv, err := startFloor(floorFlag)
	if err != nil {
		return 0, 0, err
	}
	defer srv.stop()
	get := func(ctx context.Context) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodGet, srv.url, nil)
	}
	if server, err = b.floorCPU(ctx, "bare HTTP server", srv, get); err != nil {
		return 0, 0, err
	}
	px, err := startFloor(proxyFloorFlag, srv.addr)
	if err != nil {
		return 0, 0, err
	}
	defer px.stop()
	post := func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, px.url, strings.NewReader(floorForm))
		if err == nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		return req, err
	}
	if proxy, err = b.floorCPU(ctx, "bare reverse proxy", px, post); err != nil {
		return 0, 0, err
	}
	return server, proxy, nil
}

// floorChild is a child process serving at url.
type floorChild struct {
	cmd       *exec.Cmd
	addr, url string
}

func (c *floorChild) stop() {
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

// startFloor starts this binary with flag, a free loopback address and
// args.
func startFloor(flag string, args ...string) (*floorChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	cmd := exec.Command(exe, append([]string{flag, addr}, args...)...)
	cmd.Env = launch.ChildEnv(nil) // as the Gatehouse processes get it
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &floorChild{cmd: cmd, addr: addr, url: "http://" + addr + "/"}, nil
}

// floorCPU waits until c answers, sends the warm-up and then the measured
// requests made by req, and returns c's CPU per measured request.
func (b *bench) floorCPU(ctx context.Context, what string, c *floorChild, req func(context.Context) (*http.Request, error)) (time.Duration, error) {
	client := load.NewClient(b.cfg.concurrency)
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := client.Get(c.url)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
			err = fmt.Errorf("HTTP %d", res.StatusCode)
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s did not start: %w", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	check := func(body []byte) error {
		if len(body) != len(floor.KeySetBody) {
			return errors.New("short body")
		}
		return nil
	}
	o := load.Options{Client: client, Requests: b.cfg.warmup, Concurrency: b.cfg.concurrency}
	if _, err := load.Run(ctx, o, req, check); err != nil {
		return 0, err
	}
	before, err := procstat.CPUTime(c.cmd.Process.Pid)
	if err != nil {
		return 0, err
	}
	o.Requests = b.cfg.requests
	res, err := load.Run(ctx, o, req, check)
	if err != nil {
		return 0, err
	}
	if res.Errors > 0 {
		return 0, fmt.Errorf("%s: %d errors, first: %s", what, res.Errors, res.FirstError)
	}
	after, err := procstat.CPUTime(c.cmd.Process.Pid)
	if err != nil {
		return 0, err
	}
	return (after - before) / time.Duration(res.Requests), nil
}
