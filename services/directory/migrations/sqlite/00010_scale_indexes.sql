-- +goose Up
-- Queries that read a whole organization or the whole event log once the
-- directory holds a million users (found by make bench-scale's plans):
-- logins by e-mail and the uniqueness check of verified addresses compare
-- LOWER(email), which the index on the plain column served only by its
-- org_id prefix; the list APIs' "last event of this type" walked the event
-- log back from its end past every event of other types.
CREATE INDEX users_org_lower_email ON users (org_id, LOWER(email));
DROP INDEX users_org_email;
CREATE INDEX events_type_sequence ON events (aggregate_type, sequence);

-- +goose Down
DROP INDEX events_type_sequence;
CREATE INDEX users_org_email ON users (org_id, email);
DROP INDEX users_org_lower_email;
