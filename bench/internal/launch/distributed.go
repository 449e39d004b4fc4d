package launch

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// stopTimeout bounds a deployment's shutdown (the services' own graceful
// shutdown timeout is 20 s).
const stopTimeout = 25 * time.Second

// Backends are the distributed deployment's shared services.
type Backends struct {
	// PostgresURL is a database on the server where the deployment's own
	// fresh database is created (CREATE DATABASE) and dropped.
	PostgresURL string
	// RedisURL names the Redis database the deployment uses; keys that
	// appear in it during the run are deleted afterwards.
	RedisURL string
}

// Check reports, as one error per unreachable backend, whether the
// distributed deployment can run. Both must be on a loopback address.
func (b Backends) Check(ctx context.Context) error {
	var errs []error
	if err := loopbackURL(b.PostgresURL); err != nil {
		errs = append(errs, fmt.Errorf("PostgreSQL: %w", err))
	} else if conn, err := connectPostgres(ctx, b.PostgresURL); err != nil {
		errs = append(errs, fmt.Errorf("PostgreSQL at %s unreachable: %w", hostOf(b.PostgresURL), err))
	} else {
		conn.Close(ctx)
	}
	if err := loopbackURL(b.RedisURL); err != nil {
		errs = append(errs, fmt.Errorf("redis: %w", err))
	} else if rdb, err := connectRedis(b.RedisURL); err != nil {
		errs = append(errs, fmt.Errorf("redis: %w", err))
	} else {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := rdb.Ping(cctx).Err()
		cancel()
		rdb.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("redis at %s unreachable: %w", hostOf(b.RedisURL), err))
		}
	}
	// The PostgreSQL server's CPU is charged to the requests, so its
	// processes must be visible here.
	if _, err := postgresCPU(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// StartDistributed runs directory, tokens, authn and edge as four
// processes on a fresh PostgreSQL database and the given Redis database.
func StartDistributed(ctx context.Context, o Options, b Backends) (_ *Deployment, err error) {
	addrs, err := freeAddrs(4)
	if err != nil {
		return nil, err
	}
	d := &Deployment{Base: "http://" + addrs[3]}
	defer func() {
		if err != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
			defer cancel()
			err = errors.Join(err, d.Stop(sctx))
		}
	}()
	dbURL, dropDB, err := createDatabase(ctx, b.PostgresURL)
	if err != nil {
		return nil, err
	}
	d.Database = strings.TrimPrefix(mustPath(dbURL), "/")
	d.cleanup = append(d.cleanup, dropDB)
	deleteKeys, err := redisSnapshot(ctx, b.RedisURL, redisPattern)
	if err != nil {
		return nil, err
	}
	d.cleanup = append(d.cleanup, deleteKeys)
	if d.rdb, err = connectRedis(b.RedisURL); err != nil {
		return nil, err
	}
	d.cleanup = append(d.cleanup, func(context.Context) error { return d.rdb.Close() })

	env, err := commonEnv(o, d.Base)
	if err != nil {
		return nil, err
	}
	masterKey, err := randomBase64(32)
	if err != nil {
		return nil, err
	}
	internal, err := randomBase64(48)
	if err != nil {
		return nil, err
	}
	env["GATEHOUSE_DATABASE_URL"] = dbURL
	env["GATEHOUSE_REDIS_URL"] = b.RedisURL
	env["GATEHOUSE_MASTER_KEY"] = masterKey
	env["GATEHOUSE_INTERNAL_TOKEN"] = internal
	env["GATEHOUSE_DIRECTORY_URL"] = "http://" + addrs[0]
	env["GATEHOUSE_TOKENS_URL"] = "http://" + addrs[1]
	env["GATEHOUSE_AUTHN_URL"] = "http://" + addrs[2]

	// Started in dependency order; edge last, as scripts/run-distributed.sh.
	for i, name := range []string{"directory", "tokens", "authn", "edge"} {
		dataDir := filepath.Join(o.WorkDir, name+"-data")
		if err := os.Mkdir(dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
		if name == "directory" {
			d.KeyFile = filepath.Join(dataDir, "bootstrap-admin-key.json")
		}
		e := clone(env)
		e["GATEHOUSE_ADDR"] = addrs[i]
		e["GATEHOUSE_DATA_DIR"] = dataDir
		pprof := profiling(e, name, fmt.Sprintf("127.0.0.1:%d", 19090+i))
		p, err := start(o, name, addrs[i], e)
		if err != nil {
			return nil, err
		}
		if pprof != "" {
			p.metrics = pprof
		}
		d.procs = append(d.procs, p)
	}
	if err := d.waitStarted(ctx, o); err != nil {
		return nil, err // waitStarted has stopped and cleaned up
	}
	return d, nil
}

// createDatabase creates a uniquely named database next to base's and
// returns its URL and a function that drops it.
func createDatabase(ctx context.Context, base string) (string, func(context.Context) error, error) {
	conn, err := connectPostgres(ctx, base)
	if err != nil {
		return "", nil, fmt.Errorf("PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	suffix, err := randomString(5)
	if err != nil {
		return "", nil, err
	}
	name := "gatehouse_bench_" + suffix
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u, _ := url.Parse(base) // parsed by connectPostgres already
	u.Path = "/" + name
	drop := func(ctx context.Context) error {
		conn, err := connectPostgres(ctx, base)
		if err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	}
	return u.String(), drop, nil
}

func connectPostgres(ctx context.Context, raw string) (*pgx.Conn, error) {
	if err := loopbackURL(raw); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return pgx.Connect(cctx, raw)
}

func connectRedis(raw string) (*redis.Client, error) {
	if err := loopbackURL(raw); err != nil {
		return nil, err
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("parse Redis URL: %w", err)
	}
	return redis.NewClient(opts), nil
}

// redisPattern matches every key Gatehouse writes (revocation list, rate
// limits).
const redisPattern = "gatehouse:*"

// redisSnapshot records the keys matching pattern in the deployment's Redis
// database and returns a function that deletes every matching key created
// since: the tokens service's revocation-list marker must not outlive the
// PostgreSQL database it describes.
func redisSnapshot(ctx context.Context, raw, pattern string) (func(context.Context) error, error) {
	before, err := redisKeys(ctx, raw, pattern)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		after, err := redisKeys(ctx, raw, pattern)
		if err != nil {
			return err
		}
		rdb, err := connectRedis(raw)
		if err != nil {
			return err
		}
		defer rdb.Close()
		for k := range after {
			if !before[k] {
				if err := rdb.Del(ctx, k).Err(); err != nil {
					return fmt.Errorf("redis: delete %s: %w", k, err)
				}
			}
		}
		return nil
	}, nil
}

func redisKeys(ctx context.Context, raw, pattern string) (map[string]bool, error) {
	rdb, err := connectRedis(raw)
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	keys := map[string]bool{}
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		keys[iter.Val()] = true
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("redis: scan: %w", err)
	}
	return keys, nil
}

// loopbackURL refuses a backend URL whose host is not a loopback address:
// the benchmark never sends traffic off the machine.
func loopbackURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("malformed URL")
	}
	if !isLoopbackHost(u.Hostname()) {
		return fmt.Errorf("host %q is not a loopback address", u.Hostname())
	}
	return nil
}

// mustPath is the path of a URL this package built.
func mustPath(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Path
}

func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(malformed URL)"
	}
	return u.Host
}
