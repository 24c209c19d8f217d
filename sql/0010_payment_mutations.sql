-- Customer payments take an optional client mutation id: a till or a
-- cashier's screen that lost the answer retries with the same id and gets
-- the first receipt back, never a second payment. The unique index is the
-- guarantee across server processes.
ALTER TABLE customer_ledger
    ADD COLUMN client_mutation_id text CHECK (length(client_mutation_id) BETWEEN 1 AND 200),
    ADD COLUMN request_digest text;
CREATE UNIQUE INDEX customer_ledger_mutation_key
    ON customer_ledger (customer_id, client_mutation_id) WHERE client_mutation_id IS NOT NULL;
