-- Controls of the second review.
--
-- A destruction is witnessed by someone other than its author. The witness
-- may be named as a user of the branch: the write-off and each controlled
-- line keep that user beside the name the register shows, and the user is
-- never the one who recorded the write-off.
ALTER TABLE write_offs
    ADD COLUMN witness_user_id uuid REFERENCES users (id),
    ADD CONSTRAINT write_offs_witness_not_author
        CHECK (witness_user_id IS NULL OR witness_user_id <> created_by);
ALTER TABLE write_off_items
    ADD COLUMN witness_user_id uuid REFERENCES users (id);

-- A console session also has an absolute lifetime, counted from sign-in:
-- `created_at` already records it, and the lookup filters on it.
