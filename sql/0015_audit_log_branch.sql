-- Audit-log entries belong to a branch, so a non-admin auditor reads only
-- its own branch's entries (and the organisation-wide ones, branch_id
-- null: settings and the catalogue). An entry's branch is the branch of
-- the record it describes, or else its actor's branch.
--
-- No foreign key: the column labels who may read the entry, and a key
-- would take a share lock on the branch row from every audited write.
ALTER TABLE audit_log ADD COLUMN branch_id uuid;

-- Entries written before: the branch of the record, where it has one.
UPDATE audit_log a SET branch_id = u.branch_id
  FROM users u WHERE a.entity_type = 'user' AND a.entity_id = u.id::text;
UPDATE audit_log a SET branch_id = d.branch_id
  FROM devices d WHERE a.entity_type = 'device' AND a.entity_id = d.id::text;
UPDATE audit_log a SET branch_id = p.branch_id
  FROM approvals p WHERE a.entity_type = 'approval' AND a.entity_id = p.id::text;
UPDATE audit_log a SET branch_id = b.branch_id
  FROM batches b WHERE a.entity_type = 'batch' AND a.entity_id = b.id::text;
UPDATE audit_log a SET branch_id = c.branch_id
  FROM sync_conflicts c WHERE a.entity_type = 'sync_conflict' AND a.entity_id = c.id::text;
-- Anything else but the organisation-wide records: the actor's branch.
UPDATE audit_log a SET branch_id = u.branch_id
  FROM users u
 WHERE a.branch_id IS NULL AND a.actor_id = u.id
   AND a.entity_type NOT IN ('settings', 'medicine');

CREATE INDEX audit_log_branch_idx ON audit_log (branch_id, created_at DESC);
