-- +goose Up
-- OpenID Connect Back-Channel Logout 1.0. session_clients names the apps
-- that received tokens (a code, implicit tokens, an approved device
-- authorization) in a browser session: created_at is the first issue
-- (a user's cut-off reaches the sessions of apps served up to it),
-- last_issued_at the latest (pruning keeps a row while the app may
-- still hold tokens of the session).
CREATE TABLE session_clients (
    session_id     TEXT     NOT NULL,
    client_id      TEXT     NOT NULL,
    user_id        TEXT     NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL,
    last_issued_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (session_id, client_id)
);
CREATE INDEX session_clients_user ON session_clients (user_id, created_at);
CREATE INDEX session_clients_last_issued ON session_clients (last_issued_at);
-- The outbox of logout tokens to deliver: written in the transaction that
-- revokes the session's or the user's tokens, deleted once delivered,
-- dropped or given up. next_attempt_at is also the lease a sender takes
-- (a conditional UPDATE) so that no two senders post one row at once;
-- attempts counts the tries.
CREATE TABLE backchannel_logouts (
    session_id      TEXT     NOT NULL,
    client_id       TEXT     NOT NULL,
    user_id         TEXT     NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    next_attempt_at TIMESTAMPTZ NOT NULL,
    attempts        INTEGER  NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, client_id)
);
CREATE INDEX backchannel_logouts_due ON backchannel_logouts (next_attempt_at);
CREATE INDEX backchannel_logouts_created ON backchannel_logouts (created_at);
-- +goose Down
DROP TABLE backchannel_logouts;
DROP TABLE session_clients;
