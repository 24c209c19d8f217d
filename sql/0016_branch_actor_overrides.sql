-- Per-branch actor tuning set by an operator at run time
-- (PUT /ops/actors/branches/{id}): the branch's mailbox capacity and the
-- most REST sales one group commit makes. NULL keeps the configured value
-- (a static override in config/*.toml by branch code, else the default).
-- Every server process reloads this table every few seconds and resizes its
-- live branch actors; deleting the row returns the branch to its defaults.
CREATE TABLE branch_actor_overrides (
    branch_id       uuid PRIMARY KEY REFERENCES branches (id),
    mailbox         integer CHECK (mailbox BETWEEN 1 AND 100000),
    sale_batch_max  integer CHECK (sale_batch_max BETWEEN 1 AND 1024),
    updated_by      uuid REFERENCES users (id),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CHECK (mailbox IS NOT NULL OR sale_batch_max IS NOT NULL)
);
