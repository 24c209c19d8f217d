-- Tokens that stop at once.
--
-- `users.token_version` counts the events that end every token of a user: a
-- password change, a role or branch change, a deactivation or deletion, and
-- a detected refresh-token reuse. Access tokens carry the version they were
-- issued at (`ver`) and the caller extractor refuses any other. The trigger
-- below bumps it in the same statement as the change, whoever writes it, and
-- refuses to lower it (a lower version would bring old tokens back).
--
-- `auth_sessions` is one sign-in: the refresh-token family and the access
-- tokens issued in it (`sid`). Logging out (or a reuse of one of its refresh
-- tokens) sets `revoked_at`; the extractor and refresh refuse a revoked
-- session, and refresh also refuses a session of an older `token_version`.

ALTER TABLE users ADD COLUMN token_version bigint NOT NULL DEFAULT 0
    CHECK (token_version >= 0);

CREATE FUNCTION users_token_version() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.token_version < OLD.token_version THEN
        RAISE EXCEPTION 'users.token_version may not decrease (% -> %)',
            OLD.token_version, NEW.token_version
            USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.password_hash IS DISTINCT FROM OLD.password_hash
       OR NEW.role IS DISTINCT FROM OLD.role
       OR NEW.branch_id IS DISTINCT FROM OLD.branch_id
       OR (OLD.is_active AND NOT NEW.is_active)
       OR (NEW.is_deleted AND NOT OLD.is_deleted) THEN
        NEW.token_version := GREATEST(NEW.token_version, OLD.token_version + 1);
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER users_token_version BEFORE UPDATE ON users
    FOR EACH ROW EXECUTE FUNCTION users_token_version();

CREATE TABLE auth_sessions (
    id             uuid PRIMARY KEY,
    user_id        uuid NOT NULL REFERENCES users (id),
    token_version  bigint NOT NULL CHECK (token_version >= 0),
    created_at     timestamptz NOT NULL DEFAULT now(),
    revoked_at     timestamptz
);
CREATE INDEX auth_sessions_user_idx ON auth_sessions (user_id);

-- Families that exist today become sessions, so signed-in tills keep
-- refreshing (their access tokens, which carry no session, are refused and
-- refreshed once).
INSERT INTO auth_sessions (id, user_id, token_version, created_at, revoked_at)
SELECT family_id, user_id, 0, min(created_at),
       CASE WHEN bool_or(revoked_at IS NOT NULL) THEN max(revoked_at) END
FROM refresh_tokens
GROUP BY family_id, user_id;

ALTER TABLE refresh_tokens
    ADD CONSTRAINT refresh_tokens_session_fkey
    FOREIGN KEY (family_id) REFERENCES auth_sessions (id);
