-- A sale line and a stock movement name their medicine through their batch.
-- Their foreign keys go to the batch, which the writer has locked already,
-- instead of to the medicine row. Before this, every sale at every branch
-- took a key-share lock on the same few medicine rows. With two or more
-- transactions in flight, each check then shared those rows through a
-- multixact, and the checks queued on its locks. The composite key also
-- says more than the old pair: the line's medicine is its batch's
-- medicine. The batch's own key to medicines still guarantees the medicine
-- exists.
ALTER TABLE batches ADD CONSTRAINT batches_id_medicine_key UNIQUE (id, medicine_id);

ALTER TABLE stock_movements
    DROP CONSTRAINT stock_movements_medicine_id_fkey,
    DROP CONSTRAINT stock_movements_batch_id_fkey,
    ADD CONSTRAINT stock_movements_batch_medicine_fkey
        FOREIGN KEY (batch_id, medicine_id) REFERENCES batches (id, medicine_id);

ALTER TABLE sale_items
    DROP CONSTRAINT sale_items_medicine_id_fkey,
    DROP CONSTRAINT sale_items_batch_id_fkey,
    ADD CONSTRAINT sale_items_batch_medicine_fkey
        FOREIGN KEY (batch_id, medicine_id) REFERENCES batches (id, medicine_id);
