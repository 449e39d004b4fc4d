// Package revocation owns the tokens service's revocation list: which token
// ids (access token ids, JWT jti values, refresh token ids) are revoked
// until their expiry. Introspection and userinfo ask it on every request
// ([List.IsRevoked]); the revocation endpoint, refresh reuse, code replay
// and logout write to it ([List.Revoke], [List.RevokeMany]).
//
// A revocation is durable in the revoked_tokens table (migration 00020)
// before it is pushed to a fast list, which is either Redis (distributed
// mode, GATEHOUSE_REDIS_URL set) or process memory (embedded mode). The
// table is the truth; the fast list only ever answers from a complete
// copy of it, so a revoked token is never reported active:
//
//   - Redis: each revocation is a key <prefix>revoked:<id> whose value is
//     the token's expiry and whose TTL outlives it. A marker key
//     (<prefix>revocations:loaded, no TTL) is written after a full load from
//     the table. A check reads the id and the marker in one command (MGET); a
//     miss is trusted only when the marker exists. Checks that run at once
//     share one MGET, sent after each of them began (batcher). The marker's value is the
//     Redis server's run_id, which changes at every start, and every new
//     connection deletes a marker of another run_id before it is used: a
//     Redis restarted from a snapshot, or a replica promoted by a failover,
//     may hold the marker without entries pushed after the snapshot. Without
//     the marker (Redis restarted empty or from such a snapshot, flushed)
//     the check is answered from the table while one
//     replica rebuilds the list (single-flight locally and across replicas
//     through a lock key; a flush during the rebuild leaves no marker). When
//     Redis fails, checks are answered from the table and a warning is
//     logged at most every 30 s; after a failure a replica answers misses
//     from the table until it has pushed every row still marked pending.
//     Rows are written pending and cleared once Redis has them, so a push
//     lost to an outage or a crash is repaired by any replica's [List.Sync].
//     Redis must not evict keys (maxmemory-policy noeviction, the default)
//     and must not be shared with another deployment under the same prefix.
//   - Memory: a bounded map of id to expiry. On SQLite (one process owns the
//     file) a miss is trusted once the map holds every unexpired row and has
//     never overflowed; otherwise, and on PostgreSQL without Redis (other
//     replicas may write), misses are answered from the table. A process
//     must share one List between all its users.
//
// Expired revocations are never reported: an entry counts only while its
// expiry (by the injected clock) is in the future. [List.Prune] deletes
// expired rows; [List.Run] calls Sync and Prune on a schedule.
//
// It depends on pkg/db (the tokens service's database) and go-redis.
package revocation
