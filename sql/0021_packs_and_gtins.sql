-- Packs and GTINs.
--
-- A medicine counts stock in its base unit (tablet, ml, each). A pack is a
-- fixed number of base units sold or bought together (a strip of 10, a box
-- of 100), with its own optional price and GTIN. Two active packs of one
-- medicine never share a unit count or a name.
--
-- A GTIN names one product of the organisation: a medicine's base unit or
-- one pack. `product_gtins` is that register, kept by triggers on both
-- tables so that no writer can give one GTIN two holders; a GTIN is stored
-- as its 14 digits (a GTIN-13 and its GTIN-14 with a leading zero are one
-- product).
ALTER TABLE medicines
    ADD COLUMN gtin text CHECK (gtin ~ '^[0-9]{14}$');

CREATE TABLE medicine_packs (
    id             uuid PRIMARY KEY,
    medicine_id    uuid NOT NULL REFERENCES medicines (id),
    name           text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
    units          integer NOT NULL CHECK (units BETWEEN 2 AND 1000000),
    gtin           text CHECK (gtin ~ '^[0-9]{14}$'),
    selling_price  numeric(14, 2) CHECK (selling_price >= 0),
    is_sellable    boolean NOT NULL DEFAULT true,
    is_active      boolean NOT NULL DEFAULT true,
    -- Deleted packs stay for the sales and receipts that name them.
    is_deleted     boolean NOT NULL DEFAULT false,
    rev            bigint NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX medicine_packs_medicine_idx ON medicine_packs (medicine_id);
CREATE UNIQUE INDEX medicine_packs_units_key
    ON medicine_packs (medicine_id, units) WHERE is_active;
CREATE UNIQUE INDEX medicine_packs_name_key
    ON medicine_packs (medicine_id, lower(name)) WHERE is_active;

CREATE TABLE product_gtins (
    gtin         text PRIMARY KEY CHECK (gtin ~ '^[0-9]{14}$'),
    medicine_id  uuid NOT NULL REFERENCES medicines (id),
    pack_id      uuid REFERENCES medicine_packs (id)
);

-- A live medicine's GTIN names its base unit; a deleted one lets it go.
CREATE FUNCTION medicines_hold_gtin() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.gtin IS NOT NULL AND NOT OLD.is_deleted
       AND (NEW.gtin IS DISTINCT FROM OLD.gtin OR NEW.is_deleted) THEN
        DELETE FROM product_gtins
         WHERE gtin = OLD.gtin AND medicine_id = OLD.id AND pack_id IS NULL;
    END IF;
    IF NEW.gtin IS NOT NULL AND NOT NEW.is_deleted
       AND (TG_OP = 'INSERT' OR NEW.gtin IS DISTINCT FROM OLD.gtin OR OLD.is_deleted) THEN
        INSERT INTO product_gtins (gtin, medicine_id, pack_id) VALUES (NEW.gtin, NEW.id, NULL);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER medicines_hold_gtin AFTER INSERT OR UPDATE OF gtin, is_deleted ON medicines
    FOR EACH ROW EXECUTE FUNCTION medicines_hold_gtin();

-- An active pack's GTIN names the pack; a deactivated one lets it go.
CREATE FUNCTION packs_hold_gtin() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.gtin IS NOT NULL AND OLD.is_active
       AND (NEW.gtin IS DISTINCT FROM OLD.gtin OR NOT NEW.is_active) THEN
        DELETE FROM product_gtins WHERE gtin = OLD.gtin AND pack_id = OLD.id;
    END IF;
    IF NEW.gtin IS NOT NULL AND NEW.is_active
       AND (TG_OP = 'INSERT' OR NEW.gtin IS DISTINCT FROM OLD.gtin OR NOT OLD.is_active) THEN
        INSERT INTO product_gtins (gtin, medicine_id, pack_id)
        VALUES (NEW.gtin, NEW.medicine_id, NEW.id);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER packs_hold_gtin AFTER INSERT OR UPDATE OF gtin, is_active ON medicine_packs
    FOR EACH ROW EXECUTE FUNCTION packs_hold_gtin();
