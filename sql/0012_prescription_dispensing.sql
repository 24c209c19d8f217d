-- A prescription is consumed by the sales made against it.
--
-- Invariants enforced here, whatever the number of server processes:
--   * a line never gives out more than was prescribed (CHECK); a sale adds
--     to `dispensed_quantity` in its own transaction while it holds the
--     prescription row `FOR UPDATE`, so concurrent sales queue on that row
--     and each sees what the previous one dispensed;
--   * a prescription from which anything was dispensed stays in the
--     prescription book: it can be neither cancelled nor deleted (CHECK on
--     the prescription row, which every sale against it updates, so a
--     concurrent cancel or delete re-checks the row the sale wrote).
ALTER TABLE prescription_items
    ADD COLUMN dispensed_quantity integer NOT NULL DEFAULT 0,
    ADD CONSTRAINT prescription_items_dispensed_within
        CHECK (dispensed_quantity >= 0 AND dispensed_quantity <= quantity);

ALTER TABLE prescriptions
    ADD COLUMN dispensed_units integer NOT NULL DEFAULT 0,
    ADD CONSTRAINT prescriptions_dispensed_units_not_negative CHECK (dispensed_units >= 0),
    ADD CONSTRAINT prescriptions_dispensed_stay_in_the_book
        CHECK (dispensed_units = 0 OR (status <> 'CANCELLED' AND NOT is_deleted));
