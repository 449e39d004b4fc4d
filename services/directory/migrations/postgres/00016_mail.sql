-- +goose Up
-- The mail outbox (package mail): a message is queued in the transaction
-- of the event that causes it and delivered by the mail worker, which
-- retries with backoff until its budget ends. data is the message's
-- sealed template data (it may hold a link with a one-time code); it is
-- cleared once the message is sent or given up. state: pending, sent or
-- failed.
CREATE TABLE mail_outbox (
    id              TEXT     NOT NULL PRIMARY KEY,
    user_id         TEXT     NOT NULL,
    kind            TEXT     NOT NULL,
    recipient       TEXT     NOT NULL,
    data            BYTEA,
    state           TEXT     NOT NULL,
    attempts        INTEGER  NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMPTZ NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    done_at         TIMESTAMPTZ,
    last_error      TEXT     NOT NULL DEFAULT ''
);
CREATE INDEX mail_outbox_due ON mail_outbox (state, next_attempt_at);
CREATE INDEX mail_outbox_user ON mail_outbox (user_id, kind, created_at);

-- One-time codes of users (package users, codes.go): a password reset's,
-- an address verification's. Only a keyed hash is stored; a new code of
-- a kind replaces the user's earlier one, and using it deletes it.
CREATE TABLE user_codes (
    user_id    TEXT     NOT NULL,
    kind       TEXT     NOT NULL,
    code_hash  BYTEA    NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (user_id, kind)
);
CREATE INDEX user_codes_expiry ON user_codes (expires_at);

-- +goose Down
DROP TABLE user_codes;
DROP TABLE mail_outbox;
