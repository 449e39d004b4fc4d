package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/gatehouse-id/gatehouse/bench/internal/launch"
	"github.com/gatehouse-id/gatehouse/bench/internal/load"
	"github.com/gatehouse-id/gatehouse/bench/internal/procstat"
)

// floorFlag runs this binary as the bare HTTP server of the floor.
const floorFlag = "-serve-http-floor"

// floorBody is about the size of a key set or token response.
var floorBody = []byte(`{"keys":[{"kty":"RSA","use":"sig","alg":"RS256","kid":"` + strings.Repeat("k", 700) + `","e":"AQAB"}]}`)

// serveFloor answers every request with floorBody: the least any Go HTTP
// server does per request (parse it, write a response), for comparison
// with Gatehouse's figures.
func serveFloor(addr string) int {
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(floorBody)
	})
	if err := http.ListenAndServe(addr, h); err != nil {
		fmt.Fprintf(os.Stderr, "gatehouse-bench %s: %v\n", floorFlag, err)
		return 1
	}
	return 0
}

// httpFloor measures the server CPU per request of serveFloor in a child
// process, with the load client and settings of the scenarios.
func (b *bench) httpFloor(ctx context.Context) (time.Duration, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	cmd := exec.Command(exe, floorFlag, addr)
	cmd.Env = launch.ChildEnv(nil) // as the Gatehouse processes get it
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	client := load.NewClient(b.cfg.concurrency)
	defer client.CloseIdleConnections()
	url := "http://" + addr + "/"
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := client.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("bare HTTP server did not start: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	req := func(ctx context.Context) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	}
	check := func(body []byte) error {
		if len(body) != len(floorBody) {
			return errors.New("short body")
		}
		return nil
	}
	o := load.Options{Client: client, Requests: b.cfg.warmup, Concurrency: b.cfg.concurrency}
	if _, err := load.Run(ctx, o, req, check); err != nil {
		return 0, err
	}
	before, err := procstat.CPUTime(cmd.Process.Pid)
	if err != nil {
		return 0, err
	}
	o.Requests = b.cfg.requests
	res, err := load.Run(ctx, o, req, check)
	if err != nil {
		return 0, err
	}
	if res.Errors > 0 {
		return 0, fmt.Errorf("bare HTTP server: %d errors, first: %s", res.Errors, res.FirstError)
	}
	after, err := procstat.CPUTime(cmd.Process.Pid)
	if err != nil {
		return 0, err
	}
	return (after - before) / time.Duration(res.Requests), nil
}
