-- Selling by pack and by scan.
--
-- A sale line stores its quantity in base units, as it always has (stock,
-- reports, returns and registers count base units); a line sold by the
-- pack also names the pack and how many base units one pack held when it
-- was sold, so the packs sold are `quantity / pack_units` and the price is
-- per pack. A line sold from a scanned code that carried a serial records
-- the GTIN (14 digits) and the serial.
ALTER TABLE sale_items
    ADD COLUMN pack_id uuid REFERENCES medicine_packs (id),
    ADD COLUMN pack_units integer NOT NULL DEFAULT 1 CHECK (pack_units >= 1),
    ADD COLUMN gtin text CHECK (gtin ~ '^[0-9]{14}$'),
    ADD COLUMN serial text CHECK (char_length(serial) BETWEEN 1 AND 20),
    ADD CONSTRAINT sale_items_whole_packs CHECK (quantity % pack_units = 0),
    ADD CONSTRAINT sale_items_serial_has_gtin CHECK (serial IS NULL OR gtin IS NOT NULL);

-- A return of a pack line counts packs; its row keeps base units too.
ALTER TABLE sale_return_items
    ADD COLUMN pack_units integer NOT NULL DEFAULT 1 CHECK (pack_units >= 1),
    ADD CONSTRAINT sale_return_items_whole_packs CHECK (quantity % pack_units = 0);

-- A serial of one GTIN is dispensed once in the whole organisation: the
-- partial unique index is what refuses the second sale, whichever server
-- process makes it. A return that restocks the line releases the serial
-- (the row stays, as history).
CREATE TABLE dispensed_serials (
    id             uuid PRIMARY KEY,
    gtin           text NOT NULL CHECK (gtin ~ '^[0-9]{14}$'),
    serial         text NOT NULL CHECK (char_length(serial) BETWEEN 1 AND 20),
    sale_id        uuid NOT NULL REFERENCES sales (id),
    sale_item_id   uuid NOT NULL REFERENCES sale_items (id),
    branch_id      uuid NOT NULL REFERENCES branches (id),
    dispensed_at   timestamptz NOT NULL DEFAULT now(),
    released_at    timestamptz,
    released_by    uuid REFERENCES sale_returns (id),
    CHECK ((released_at IS NULL) = (released_by IS NULL))
);
CREATE UNIQUE INDEX dispensed_serials_live_key
    ON dispensed_serials (gtin, serial) WHERE released_at IS NULL;
CREATE INDEX dispensed_serials_item_idx ON dispensed_serials (sale_item_id);
