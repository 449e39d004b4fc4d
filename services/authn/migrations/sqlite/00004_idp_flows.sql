-- +goose Up
-- Sign-ins in flight at an external identity provider: the state sent to
-- the IdP (stored as its SHA-256, bound to the browser and the pending
-- authorization request), the nonce and the PKCE verifier. Taken once by
-- the callback; expire with the authorization request.
CREATE TABLE idp_flows (
    state_hash      TEXT     PRIMARY KEY,
    user_agent_id   TEXT     NOT NULL,
    auth_request_id TEXT     NOT NULL,
    idp_id          TEXT     NOT NULL,
    org_id          TEXT     NOT NULL,
    nonce           TEXT     NOT NULL,
    verifier        TEXT     NOT NULL,
    expires_at      DATETIME NOT NULL
);
CREATE INDEX idp_flows_expires_at ON idp_flows (expires_at);

-- +goose Down
DROP TABLE idp_flows;
