-- +goose Up
-- A link names the identity provider as it was when the link was made: its
-- issuer and client id. A provider repointed since (a new issuer or client
-- id) asserts subjects of another namespace, which must never inherit the
-- links (the change drops them; lookups compare too). registered: the link
-- came with the user (registered through the provider), as opposed to one
-- made later by proving the user's password, which an admin's password
-- reset or a deactivation removes.
ALTER TABLE user_links ADD COLUMN issuer TEXT NOT NULL DEFAULT '';
ALTER TABLE user_links ADD COLUMN client_id TEXT NOT NULL DEFAULT '';
ALTER TABLE user_links ADD COLUMN registered BOOLEAN NOT NULL DEFAULT FALSE;
-- An IAM owner may trust a provider's "amr" values (SetOrgIDPTrust).
ALTER TABLE idps ADD COLUMN trust_amr BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE user_links SET
    issuer = COALESCE((SELECT issuer FROM idps WHERE idps.id = user_links.idp_id), ''),
    client_id = COALESCE((SELECT client_id FROM idps WHERE idps.id = user_links.idp_id), ''),
    registered = COALESCE(creation_date = (SELECT creation_date FROM users WHERE users.id = user_links.user_id), FALSE);

-- +goose Down
ALTER TABLE idps DROP COLUMN trust_amr;
ALTER TABLE user_links DROP COLUMN registered;
ALTER TABLE user_links DROP COLUMN client_id;
ALTER TABLE user_links DROP COLUMN issuer;
