-- The change feed for branch callers reads two ordered rev ranges: the
-- branch's own rows (change_log_branch_idx) and the organisation-wide rows
-- (branch_id IS NULL), merged. This partial index makes the second an exact
-- range scan in rev order, however few organisation-wide rows there are
-- among other branches' sales and batch moves.
CREATE INDEX change_log_org_wide_idx ON change_log (rev) WHERE branch_id IS NULL;
