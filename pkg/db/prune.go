package db

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// PruneBatch bounds the rows one DELETE of a PruneStep removes, so pruning
// never holds long locks or builds a huge transaction.
const PruneBatch = 1000

// Batch is PruneBatch as SQL text, for LIMIT clauses.
var Batch = strconv.Itoa(PruneBatch)

// PruneStep deletes one kind of dead row. Query must delete at most
// PruneBatch rows per execution (`DELETE FROM t WHERE pk IN (SELECT pk FROM
// t WHERE ... LIMIT ` + Batch + `)`); it is repeated until it deletes fewer.
type PruneStep struct {
	// Table names the step in logs and metrics.
	Table string
	Query string
	// Args gives the query's arguments for a round started at now.
	Args func(now time.Time) []any
}

// Pruner deletes rows that no longer matter from tables that grow with
// traffic, every Interval. On PostgreSQL one replica prunes at a time: a
// round runs only while it holds a session advisory lock for the service,
// and a replica that does not get it skips the round.
type Pruner struct {
	DB      *DB
	Service string // labels metrics
	// Lock names the advisory lock (within the database's schema) when one
	// service runs several pruners that need not wait on each other.
	Lock     string
	Steps    []PruneStep
	Interval time.Duration // default 10 minutes
	Logger   *slog.Logger

	once    sync.Once
	deleted metric.Int64Counter
	rounds  metric.Int64Counter
}

// Round is what one RunOnce did.
type Round struct {
	// Skipped: another replica held the lock.
	Skipped bool
	Deleted map[string]int64
}

// RunOnce runs every step once at now.
func (p *Pruner) RunOnce(ctx context.Context, now time.Time) (Round, error) {
	p.instruments()
	out := Round{Deleted: map[string]int64{}}
	if p.DB.dialect == Postgres {
		unlock, ok, err := p.lock(ctx)
		if err != nil {
			p.count(ctx, "error")
			return out, err
		}
		if !ok {
			out.Skipped = true
			p.count(ctx, "skipped")
			return out, nil
		}
		defer unlock()
	}
	for _, st := range p.Steps {
		args := st.Args(now)
		for {
			res, err := p.DB.Exec(ctx, st.Query, args...)
			if err != nil {
				p.count(ctx, "error")
				return out, fmt.Errorf("prune %s: %w", st.Table, err)
			}
			n, _ := res.RowsAffected()
			out.Deleted[st.Table] += n
			if n > 0 && p.deleted != nil {
				p.deleted.Add(ctx, n, metric.WithAttributes(
					attribute.String("service", p.Service), attribute.String("table", st.Table)))
			}
			if n < PruneBatch || ctx.Err() != nil {
				break
			}
		}
	}
	p.count(ctx, "ok")
	return out, nil
}

// lock takes the service's prune lock.
func (p *Pruner) lock(ctx context.Context) (unlock func(), ok bool, err error) {
	return p.DB.TryLock(ctx, "prune/"+p.Lock)
}

// TryLock takes the session advisory lock name (within the service's
// schema) on PostgreSQL, on a dedicated connection, so the lock ends with
// the connection if this process dies; ok is false when another replica
// holds it. On SQLite, which one process serves, it always succeeds.
func (d *DB) TryLock(ctx context.Context, name string) (unlock func(), ok bool, err error) {
	if d.dialect != Postgres {
		return func() {}, true, nil
	}
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("db: connection for lock %s: %w", name, err)
	}
	key := advisoryKey(name, d.service)
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ok); err != nil {
		_ = conn.Close()
		return nil, false, fmt.Errorf("db: take lock %s: %w", name, err)
	}
	if !ok {
		_ = conn.Close()
		return nil, false, nil
	}
	return func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = conn.ExecContext(uctx, `SELECT pg_advisory_unlock($1)`, key)
		_ = conn.Close()
	}, true, nil
}

// Run prunes at once and then every Interval until ctx ends. Failures are
// logged; the next round retries.
func (p *Pruner) Run(ctx context.Context) {
	every := p.Interval
	if every <= 0 {
		every = 10 * time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		r, err := p.RunOnce(ctx, time.Now())
		switch {
		case err != nil && ctx.Err() == nil:
			p.logger().WarnContext(ctx, "db: prune failed; retrying next round", "service", p.Service, "err", err)
		case err == nil && !r.Skipped:
			p.logger().DebugContext(ctx, "db: pruned", "service", p.Service, "deleted", r.Deleted)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *Pruner) logger() *slog.Logger {
	if p.Logger != nil {
		return p.Logger
	}
	return slog.Default()
}

func (p *Pruner) count(ctx context.Context, result string) {
	if p.rounds != nil {
		p.rounds.Add(ctx, 1, metric.WithAttributes(
			attribute.String("service", p.Service), attribute.String("result", result)))
	}
}

// instruments creates the metrics once; without a meter provider they are
// no-ops.
func (p *Pruner) instruments() {
	p.once.Do(func() {
		m := otel.Meter("github.com/gatehouse-id/gatehouse/pkg/db")
		p.deleted, _ = m.Int64Counter("gatehouse.db.pruned.rows",
			metric.WithDescription("Rows deleted by the background pruner, by service and table."))
		p.rounds, _ = m.Int64Counter("gatehouse.db.prune.rounds",
			metric.WithDescription("Prune rounds by service and result (ok, skipped: another replica held the lock, error)."))
	})
}
