-- Sync push: the first answer to every (device, client mutation id), kept
-- forever, and the conflicts a stale push leaves for head office.

-- One row per mutation a device ever pushed. The row is claimed (inserted)
-- at the start of the change's transaction, so a second process pushing the
-- same mutation waits on the primary key and then reads the stored answer:
-- one effect, one answer, whatever the number of servers.
CREATE TABLE push_mutations (
    device_id           uuid NOT NULL REFERENCES devices (id),
    client_mutation_id  text NOT NULL CHECK (length(client_mutation_id) BETWEEN 1 AND 200),
    request_digest      text NOT NULL,
    entity              text NOT NULL,
    op                  text NOT NULL,
    outcome             text CHECK (outcome IN ('accepted', 'rejected')),
    -- The answer exactly as first sent, replayed verbatim.
    answer              text,
    entity_id           text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (device_id, client_mutation_id),
    CHECK ((outcome IS NULL) = (answer IS NULL))
);

CREATE TABLE sync_conflicts (
    id                  uuid PRIMARY KEY,
    org_id              uuid NOT NULL REFERENCES organisations (id),
    entity_type         text NOT NULL,
    entity_id           text NOT NULL,
    branch_id           uuid NOT NULL REFERENCES branches (id),
    device_id           uuid NOT NULL REFERENCES devices (id),
    client_mutation_id  text NOT NULL,
    base_rev            bigint,
    server_rev          bigint NOT NULL,
    server_version      jsonb NOT NULL,
    client_version      jsonb NOT NULL,
    base_version        jsonb,
    payload             jsonb NOT NULL,
    status              text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'resolved')),
    strategy            text CHECK (strategy IN ('last_write_wins', 'client', 'server', 'merge')),
    applied             boolean,
    created_by          uuid REFERENCES users (id),
    created_at          timestamptz NOT NULL DEFAULT now(),
    resolved_at         timestamptz,
    resolved_by         uuid REFERENCES users (id),
    CHECK ((status = 'pending') = (resolved_at IS NULL)),
    UNIQUE (device_id, client_mutation_id)
);
CREATE INDEX sync_conflicts_pending_idx ON sync_conflicts (created_at DESC) WHERE status = 'pending';
