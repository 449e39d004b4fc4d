-- +goose Up
-- A browser is recorded only with its first session: a pending request of
-- an anonymous browser names it by its cookie's hash alone, so the foreign
-- key to user_agents goes. Requests and identity-provider flows are looked
-- up by browser at every sign-in (RotateUserAgent) and by the pruner:
-- indexed.
ALTER TABLE auth_requests DROP CONSTRAINT IF EXISTS auth_requests_user_agent_id_fkey;
CREATE INDEX auth_requests_user_agent_id ON auth_requests (user_agent_id);
CREATE INDEX idp_flows_user_agent_id ON idp_flows (user_agent_id);

-- +goose Down
DROP INDEX idp_flows_user_agent_id;
DROP INDEX auth_requests_user_agent_id;
DELETE FROM auth_requests WHERE user_agent_id NOT IN (SELECT id FROM user_agents);
ALTER TABLE auth_requests ADD CONSTRAINT auth_requests_user_agent_id_fkey
    FOREIGN KEY (user_agent_id) REFERENCES user_agents (id) ON DELETE CASCADE;
