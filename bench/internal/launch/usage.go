package launch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-id/gatehouse/bench/internal/procstat"
)

// Names under which the backends' usage is reported, beside the four
// services' names.
const (
	Postgres = "postgres"
	Redis    = "redis"
)

// postgresComm is the command name of every PostgreSQL server process
// (postmaster, backends, background workers).
const postgresComm = "postgres"

// CPUByProcess is the CPU time each server process has used so far, by
// name: edge alone embedded; directory, tokens, authn and edge, and the
// backends as Postgres and Redis, distributed. Every process named postgres
// counts (with the backends it has reaped), so on a shared PostgreSQL
// server other clients' queries are charged too.
func (d *Deployment) CPUByProcess(ctx context.Context) (map[string]time.Duration, error) {
	out := make(map[string]time.Duration, len(d.procs)+2)
	for _, p := range d.procs {
		if err := p.exited(); err != nil {
			return nil, err
		}
		cpu, err := procstat.CPUTime(p.cmd.Process.Pid)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		out[p.name] = cpu
	}
	if d.rdb == nil {
		return out, nil
	}
	pg, err := postgresCPU()
	if err != nil {
		return nil, err
	}
	out[Postgres] = pg
	info, err := readRedisInfo(ctx, d.rdb)
	if err != nil {
		return nil, err
	}
	out[Redis] = info.cpu
	return out, nil
}

// RSSByProcess is the resident set size, in bytes, of each process
// CPUByProcess names but PostgreSQL's: its processes share their buffers,
// so a sum of their sizes would mean nothing. Redis's is its
// used_memory_rss.
func (d *Deployment) RSSByProcess(ctx context.Context) (map[string]int64, error) {
	out := make(map[string]int64, len(d.procs)+1)
	for _, p := range d.procs {
		rss, err := procstat.RSS(p.cmd.Process.Pid)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		out[p.name] = rss
	}
	if d.rdb == nil {
		return out, nil
	}
	info, err := readRedisInfo(ctx, d.rdb)
	if err != nil {
		return nil, err
	}
	out[Redis] = info.rss
	return out, nil
}

// postgresCPU is the CPU time of every PostgreSQL process on the machine.
func postgresCPU() (time.Duration, error) {
	cpu, n, err := procstat.ByName(postgresComm)
	if err != nil {
		return 0, fmt.Errorf("PostgreSQL CPU: %w", err)
	}
	if n == 0 {
		return 0, errors.New("PostgreSQL CPU: no process named postgres in this machine's /proc")
	}
	return cpu, nil
}

// redisUsage is what INFO tells of the Redis server's resources.
type redisUsage struct {
	cpu time.Duration // used_cpu_user + used_cpu_sys
	rss int64         // used_memory_rss, bytes
}

// readRedisInfo asks the server the deployment uses, rather than looking
// for a redis-server process: it is the right one even when several run.
func readRedisInfo(ctx context.Context, rdb *redis.Client) (redisUsage, error) {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	raw, err := rdb.Info(cctx, "cpu", "memory").Result()
	if err != nil {
		return redisUsage{}, fmt.Errorf("redis INFO: %w", err)
	}
	u, err := parseRedisInfo(raw)
	if err != nil {
		return redisUsage{}, fmt.Errorf("redis INFO: %w", err)
	}
	return u, nil
}

// parseRedisInfo reads used_cpu_user and used_cpu_sys (seconds, with
// microseconds) and used_memory_rss (bytes) from an INFO answer.
func parseRedisInfo(raw string) (redisUsage, error) {
	var (
		u    redisUsage
		seen = map[string]bool{}
	)
	sc := bufio.NewScanner(strings.NewReader(raw))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch k {
		case "used_cpu_user", "used_cpu_sys":
			s, err := strconv.ParseFloat(v, 64)
			if err != nil || s < 0 {
				return redisUsage{}, fmt.Errorf("malformed %s %q", k, v)
			}
			u.cpu += time.Duration(math.Round(s*1e6)) * time.Microsecond
		case "used_memory_rss":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return redisUsage{}, fmt.Errorf("malformed %s %q", k, v)
			}
			u.rss = n
		default:
			continue
		}
		seen[k] = true
	}
	for _, k := range []string{"used_cpu_user", "used_cpu_sys", "used_memory_rss"} {
		if !seen[k] {
			return redisUsage{}, fmt.Errorf("no %s in the answer", k)
		}
	}
	return u, nil
}
