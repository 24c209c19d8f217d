-- Browser sessions of the back-office console (/console). Each one rides on
-- an `auth_sessions` row opened at sign-in, so everything that ends a
-- sign-in of the API (sign-out, a password, role or branch change, a
-- deactivation) ends the console session too. The cookie holds a random
-- token; only its SHA-256 digest is stored. `last_seen_at` moves on each
-- request; a session idle for longer than the configured limit is refused
-- and removed.
CREATE TABLE console_sessions (
    token_hash       bytea PRIMARY KEY CHECK (octet_length(token_hash) = 32),
    auth_session_id  uuid NOT NULL REFERENCES auth_sessions (id),
    user_id          uuid NOT NULL REFERENCES users (id),
    token_version    bigint NOT NULL CHECK (token_version >= 0),
    csrf_token       text NOT NULL CHECK (length(csrf_token) BETWEEN 32 AND 128),
    created_at       timestamptz NOT NULL DEFAULT now(),
    last_seen_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX console_sessions_user_idx ON console_sessions (user_id);
CREATE INDEX console_sessions_seen_idx ON console_sessions (last_seen_at);
