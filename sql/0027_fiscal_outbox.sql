-- The fiscal outbox: one row per document the tax authority (URA's EFRIS)
-- must receive, written in the same transaction as what it fiscalises, and
-- every attempt to submit it.
--
-- Invariants enforced here, whatever the number of server processes:
--   * one document per kind, source and revision (`UNIQUE`), so a retried
--     write or a replayed push never queues a second one;
--   * one document per seller reference and kind: a resubmission always
--     carries the same reference, and the authority answers a repeat with
--     its first document;
--   * an FDN names one document;
--   * `accepted` if and only if the authority's identifiers are present
--     (an invoice's FDN, verification code and QR code; a credit note's
--     reference number; goods and stock documents carry only the time);
--   * a `submitting` row holds a lease (who and until when), so a process
--     killed mid-submission leaves a row another process takes afterwards;
--   * a rejected row carries the authority's answer.

CREATE TABLE fiscal_documents (
    id                 uuid PRIMARY KEY,
    kind               text NOT NULL CHECK (kind IN ('T109', 'T110', 'T130', 'T131')),
    source_id          uuid NOT NULL,
    revision           integer NOT NULL DEFAULT 1 CHECK (revision >= 1),
    branch_id          uuid REFERENCES branches (id),
    status             text NOT NULL DEFAULT 'pending'
                       CHECK (status IN ('waiting', 'pending', 'submitting', 'accepted',
                                         'retrying', 'rejected')),
    -- What the document waits for: an invoice's FDN (a credit note), or
    -- goods registrations (an invoice, a stock increase).
    depends_on         uuid[] NOT NULL DEFAULT '{}',
    payload            jsonb NOT NULL,
    payload_hash       text NOT NULL CHECK (char_length(payload_hash) = 64),
    -- The seller's own reference, resent unchanged on every attempt:
    -- the invoice or credit note number (with its counter), the goods
    -- code, the stock document's id.
    seller_reference   text NOT NULL CHECK (char_length(seller_reference) BETWEEN 1 AND 200),
    attempts           integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at    timestamptz NOT NULL DEFAULT now(),
    lease_until        timestamptz,
    claimed_by         text CHECK (char_length(claimed_by) <= 200),
    last_error         text CHECK (char_length(last_error) <= 2000),
    last_return_code   text CHECK (char_length(last_return_code) <= 50),
    fdn                text CHECK (char_length(fdn) BETWEEN 1 AND 100),
    verification_code  text CHECK (char_length(verification_code) BETWEEN 1 AND 100),
    qr_code            text CHECK (char_length(qr_code) BETWEEN 1 AND 2000),
    reference_no       text CHECK (char_length(reference_no) BETWEEN 1 AND 100),
    accepted_at        timestamptz,
    simulated          boolean NOT NULL DEFAULT false,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (kind, source_id, revision),
    CONSTRAINT fiscal_documents_accepted_has_ids CHECK (
        (status = 'accepted') = (accepted_at IS NOT NULL)
        AND (status <> 'accepted' OR kind <> 'T109'
             OR (fdn IS NOT NULL AND verification_code IS NOT NULL AND qr_code IS NOT NULL))
        AND (status <> 'accepted' OR kind <> 'T110' OR reference_no IS NOT NULL)
        AND (status = 'accepted' OR (fdn IS NULL AND verification_code IS NULL
                                     AND qr_code IS NULL AND reference_no IS NULL))
    ),
    CONSTRAINT fiscal_documents_lease_held CHECK (
        (status = 'submitting') = (lease_until IS NOT NULL AND claimed_by IS NOT NULL)
    ),
    CONSTRAINT fiscal_documents_rejection_explained CHECK (
        status <> 'rejected' OR last_error IS NOT NULL
    )
);
CREATE UNIQUE INDEX fiscal_documents_fdn_key ON fiscal_documents (fdn) WHERE fdn IS NOT NULL;
-- One live document per seller reference and kind: a new revision of a
-- rejected document replaces it (the old revision stays, rejected).
CREATE UNIQUE INDEX fiscal_documents_reference_key ON fiscal_documents (kind, seller_reference)
    WHERE status <> 'rejected';
-- The worker's queue: due rows in order.
CREATE INDEX fiscal_documents_due_idx ON fiscal_documents (next_attempt_at)
    WHERE status IN ('pending', 'retrying', 'submitting');
CREATE INDEX fiscal_documents_waiting_idx ON fiscal_documents USING gin (depends_on)
    WHERE status = 'waiting';
CREATE INDEX fiscal_documents_source_idx ON fiscal_documents (source_id, kind, revision DESC);
CREATE INDEX fiscal_documents_branch_idx ON fiscal_documents (branch_id, created_at DESC, id DESC);
CREATE INDEX fiscal_documents_created_idx ON fiscal_documents (created_at DESC, id DESC);

CREATE TABLE fiscal_attempts (
    id            uuid PRIMARY KEY,
    document_id   uuid NOT NULL REFERENCES fiscal_documents (id),
    attempt       integer NOT NULL CHECK (attempt >= 1),
    started_at    timestamptz NOT NULL,
    finished_at   timestamptz NOT NULL DEFAULT now(),
    outcome       text NOT NULL
                  CHECK (outcome IN ('accepted', 'duplicate', 'transient', 'rejected', 'waiting')),
    return_code   text CHECK (char_length(return_code) <= 50),
    message       text NOT NULL DEFAULT '' CHECK (char_length(message) <= 2000),
    claimed_by    text NOT NULL DEFAULT '' CHECK (char_length(claimed_by) <= 200),
    UNIQUE (document_id, attempt)
);
