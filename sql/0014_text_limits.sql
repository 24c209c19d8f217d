-- Every text column a client can write has a maximum length, held here as
-- well as in the write paths' validation (actors/src/input.rs, `max`), so
-- that no single value can grow a row, a change-feed entry sent to every
-- till, or a sync conflict past a few kilobytes, whichever process writes.
--
-- Lengths are in characters (char_length):
--   names 200, notes / reasons / descriptions / receipt texts 2000,
--   codes, phones, national ids, tax numbers 50, short labels and
--   references 100 (some 200), addresses 500, emails 254, links 1000.
--
-- A value already longer than its limit could only be junk (the limits are
-- generous); it is cut to the limit before the constraint is added, so the
-- constraint holds for every row. Each table is scanned once for its
-- update and once for its new constraints.

-- Organisation and branches.
UPDATE organisations SET name = left(name, 200) WHERE char_length(name) > 200;
ALTER TABLE organisations
    ADD CONSTRAINT organisations_name_max_length CHECK (char_length(name) <= 200);

UPDATE branches SET
    city = left(city, 100),
    vat_number = left(vat_number, 50),
    address = left(address, 500),
    image_url = left(image_url, 1000)
WHERE char_length(city) > 100 OR char_length(vat_number) > 50
   OR char_length(address) > 500 OR char_length(image_url) > 1000;
ALTER TABLE branches
    ADD CONSTRAINT branches_city_max_length CHECK (char_length(city) <= 100),
    ADD CONSTRAINT branches_vat_number_max_length CHECK (char_length(vat_number) <= 50),
    ADD CONSTRAINT branches_address_max_length CHECK (char_length(address) <= 500),
    ADD CONSTRAINT branches_image_url_max_length CHECK (char_length(image_url) <= 1000);

-- Users (synced to every till of their branch) and devices.
UPDATE users SET
    full_name = left(full_name, 200),
    phone = left(phone, 50)
WHERE char_length(full_name) > 200 OR char_length(phone) > 50;
ALTER TABLE users
    ADD CONSTRAINT users_full_name_max_length CHECK (char_length(full_name) <= 200),
    ADD CONSTRAINT users_phone_max_length CHECK (char_length(phone) <= 50);

UPDATE devices SET name = left(name, 200) WHERE char_length(name) > 200;
ALTER TABLE devices
    ADD CONSTRAINT devices_name_max_length CHECK (char_length(name) <= 200);

-- Settings (NULL means "not given" and passes).
UPDATE settings SET
    name = left(name, 200),
    legal_name = left(legal_name, 200),
    phone = left(phone, 50),
    email = left(email, 254),
    address = left(address, 500),
    tin = left(tin, 50),
    vat_number = left(vat_number, 50),
    nda_license_no = left(nda_license_no, 50),
    premise_no = left(premise_no, 50),
    receipt_header = left(receipt_header, 2000),
    receipt_footer = left(receipt_footer, 2000),
    return_policy = left(return_policy, 2000),
    server_url = left(server_url, 1000)
WHERE char_length(name) > 200 OR char_length(legal_name) > 200
   OR char_length(phone) > 50 OR char_length(email) > 254
   OR char_length(address) > 500 OR char_length(tin) > 50
   OR char_length(vat_number) > 50 OR char_length(nda_license_no) > 50
   OR char_length(premise_no) > 50 OR char_length(receipt_header) > 2000
   OR char_length(receipt_footer) > 2000 OR char_length(return_policy) > 2000
   OR char_length(server_url) > 1000;
ALTER TABLE settings
    ADD CONSTRAINT settings_name_max_length CHECK (char_length(name) <= 200),
    ADD CONSTRAINT settings_legal_name_max_length CHECK (char_length(legal_name) <= 200),
    ADD CONSTRAINT settings_phone_max_length CHECK (char_length(phone) <= 50),
    ADD CONSTRAINT settings_email_max_length CHECK (char_length(email) <= 254),
    ADD CONSTRAINT settings_address_max_length CHECK (char_length(address) <= 500),
    ADD CONSTRAINT settings_tin_max_length CHECK (char_length(tin) <= 50),
    ADD CONSTRAINT settings_vat_number_max_length CHECK (char_length(vat_number) <= 50),
    ADD CONSTRAINT settings_nda_license_no_max_length CHECK (char_length(nda_license_no) <= 50),
    ADD CONSTRAINT settings_premise_no_max_length CHECK (char_length(premise_no) <= 50),
    ADD CONSTRAINT settings_receipt_header_max_length CHECK (char_length(receipt_header) <= 2000),
    ADD CONSTRAINT settings_receipt_footer_max_length CHECK (char_length(receipt_footer) <= 2000),
    ADD CONSTRAINT settings_return_policy_max_length CHECK (char_length(return_policy) <= 2000),
    ADD CONSTRAINT settings_server_url_max_length CHECK (char_length(server_url) <= 1000),
    ADD CONSTRAINT settings_expiry_warning_days_max_length
        CHECK (char_length(expiry_warning_days) <= 100),
    ADD CONSTRAINT settings_time_zone_max_length CHECK (char_length(time_zone) <= 100);

-- The catalogue: categories, medicines, suppliers.
UPDATE categories SET name = left(name, 200) WHERE char_length(name) > 200;
ALTER TABLE categories
    ADD CONSTRAINT categories_name_max_length CHECK (char_length(name) <= 200);

UPDATE medicines SET
    generic_name = left(generic_name, 200),
    barcode = left(barcode, 100),
    form = left(form, 100),
    strength = left(strength, 100),
    unit = left(unit, 100),
    control_schedule = left(control_schedule, 50),
    regulator_registration_no = left(regulator_registration_no, 100),
    image_key = left(image_key, 1000),
    image_url = left(image_url, 1000)
WHERE char_length(generic_name) > 200 OR char_length(barcode) > 100
   OR char_length(form) > 100 OR char_length(strength) > 100
   OR char_length(unit) > 100 OR char_length(control_schedule) > 50
   OR char_length(regulator_registration_no) > 100
   OR char_length(image_key) > 1000 OR char_length(image_url) > 1000;
ALTER TABLE medicines
    ADD CONSTRAINT medicines_generic_name_max_length CHECK (char_length(generic_name) <= 200),
    ADD CONSTRAINT medicines_barcode_max_length CHECK (char_length(barcode) <= 100),
    ADD CONSTRAINT medicines_form_max_length CHECK (char_length(form) <= 100),
    ADD CONSTRAINT medicines_strength_max_length CHECK (char_length(strength) <= 100),
    ADD CONSTRAINT medicines_unit_max_length CHECK (char_length(unit) <= 100),
    ADD CONSTRAINT medicines_control_schedule_max_length
        CHECK (char_length(control_schedule) <= 50),
    ADD CONSTRAINT medicines_regulator_registration_no_max_length
        CHECK (char_length(regulator_registration_no) <= 100),
    ADD CONSTRAINT medicines_image_key_max_length CHECK (char_length(image_key) <= 1000),
    ADD CONSTRAINT medicines_image_url_max_length CHECK (char_length(image_url) <= 1000);

UPDATE suppliers SET
    tax_number = left(tax_number, 50),
    contact_person = left(contact_person, 200),
    phone = left(phone, 50),
    email = left(email, 254),
    address = left(address, 500),
    image_url = left(image_url, 1000),
    supplier_type = left(supplier_type, 50)
WHERE char_length(tax_number) > 50 OR char_length(contact_person) > 200
   OR char_length(phone) > 50 OR char_length(email) > 254
   OR char_length(address) > 500 OR char_length(image_url) > 1000
   OR char_length(supplier_type) > 50;
ALTER TABLE suppliers
    ADD CONSTRAINT suppliers_tax_number_max_length CHECK (char_length(tax_number) <= 50),
    ADD CONSTRAINT suppliers_contact_person_max_length CHECK (char_length(contact_person) <= 200),
    ADD CONSTRAINT suppliers_phone_max_length CHECK (char_length(phone) <= 50),
    ADD CONSTRAINT suppliers_email_max_length CHECK (char_length(email) <= 254),
    ADD CONSTRAINT suppliers_address_max_length CHECK (char_length(address) <= 500),
    ADD CONSTRAINT suppliers_image_url_max_length CHECK (char_length(image_url) <= 1000),
    ADD CONSTRAINT suppliers_supplier_type_max_length CHECK (char_length(supplier_type) <= 50);

-- Customers and their ledger.
UPDATE customers SET
    phone = left(phone, 50),
    national_id = left(national_id, 50),
    notes = left(notes, 2000),
    image_url = left(image_url, 1000)
WHERE char_length(phone) > 50 OR char_length(national_id) > 50
   OR char_length(notes) > 2000 OR char_length(image_url) > 1000;
ALTER TABLE customers
    ADD CONSTRAINT customers_phone_max_length CHECK (char_length(phone) <= 50),
    ADD CONSTRAINT customers_national_id_max_length CHECK (char_length(national_id) <= 50),
    ADD CONSTRAINT customers_notes_max_length CHECK (char_length(notes) <= 2000),
    ADD CONSTRAINT customers_image_url_max_length CHECK (char_length(image_url) <= 1000);

UPDATE customer_ledger SET notes = left(notes, 2000) WHERE char_length(notes) > 2000;
ALTER TABLE customer_ledger
    ADD CONSTRAINT customer_ledger_notes_max_length CHECK (char_length(notes) <= 2000);

-- Prescriptions, their lines, the classified-drugs register, will-call.
UPDATE prescriptions SET
    patient_name = left(patient_name, 200),
    patient_id_number = left(patient_id_number, 100),
    prescriber_name = left(prescriber_name, 200),
    prescriber_license = left(prescriber_license, 100),
    notes = left(notes, 2000)
WHERE char_length(patient_name) > 200 OR char_length(patient_id_number) > 100
   OR char_length(prescriber_name) > 200 OR char_length(prescriber_license) > 100
   OR char_length(notes) > 2000;
ALTER TABLE prescriptions
    ADD CONSTRAINT prescriptions_patient_name_max_length CHECK (char_length(patient_name) <= 200),
    ADD CONSTRAINT prescriptions_patient_id_number_max_length
        CHECK (char_length(patient_id_number) <= 100),
    ADD CONSTRAINT prescriptions_prescriber_name_max_length
        CHECK (char_length(prescriber_name) <= 200),
    ADD CONSTRAINT prescriptions_prescriber_license_max_length
        CHECK (char_length(prescriber_license) <= 100),
    ADD CONSTRAINT prescriptions_notes_max_length CHECK (char_length(notes) <= 2000);

UPDATE prescription_items SET dosage_instructions = left(dosage_instructions, 2000)
WHERE char_length(dosage_instructions) > 2000;
ALTER TABLE prescription_items
    ADD CONSTRAINT prescription_items_dosage_instructions_max_length
        CHECK (char_length(dosage_instructions) <= 2000);

UPDATE controlled_dispenses SET
    patient_national_id = left(patient_national_id, 100),
    doctor_license = left(doctor_license, 100)
WHERE char_length(patient_national_id) > 100 OR char_length(doctor_license) > 100;
ALTER TABLE controlled_dispenses
    ADD CONSTRAINT controlled_dispenses_patient_national_id_max_length
        CHECK (char_length(patient_national_id) <= 100),
    ADD CONSTRAINT controlled_dispenses_doctor_license_max_length
        CHECK (char_length(doctor_license) <= 100);

UPDATE will_call_pickups SET patient_phone = left(patient_phone, 50)
WHERE char_length(patient_phone) > 50;
ALTER TABLE will_call_pickups
    ADD CONSTRAINT will_call_pickups_patient_phone_max_length
        CHECK (char_length(patient_phone) <= 50);

UPDATE approvals SET
    reference_id = left(reference_id, 200),
    reason = left(reason, 2000)
WHERE char_length(reference_id) > 200 OR char_length(reason) > 2000;
ALTER TABLE approvals
    ADD CONSTRAINT approvals_reference_id_max_length CHECK (char_length(reference_id) <= 200),
    ADD CONSTRAINT approvals_reason_max_length CHECK (char_length(reason) <= 2000);

UPDATE marketing_enquiries SET
    phone = left(phone, 50),
    topic = left(topic, 100),
    client_address = left(client_address, 100)
WHERE char_length(phone) > 50 OR char_length(topic) > 100 OR char_length(client_address) > 100;
ALTER TABLE marketing_enquiries
    ADD CONSTRAINT marketing_enquiries_phone_max_length CHECK (char_length(phone) <= 50),
    ADD CONSTRAINT marketing_enquiries_topic_max_length CHECK (char_length(topic) <= 100),
    ADD CONSTRAINT marketing_enquiries_client_address_max_length
        CHECK (char_length(client_address) <= 100);

-- Stock: batches, transfers, stock counts.
UPDATE batches SET
    batch_number = left(batch_number, 100),
    notes = left(notes, 2000)
WHERE char_length(batch_number) > 100 OR char_length(notes) > 2000;
ALTER TABLE batches
    ADD CONSTRAINT batches_batch_number_max_length CHECK (char_length(batch_number) <= 100),
    ADD CONSTRAINT batches_notes_max_length CHECK (char_length(notes) <= 2000);

UPDATE transfers SET notes = left(notes, 2000) WHERE char_length(notes) > 2000;
ALTER TABLE transfers
    ADD CONSTRAINT transfers_notes_max_length CHECK (char_length(notes) <= 2000);

UPDATE stock_count_lines SET notes = left(notes, 2000) WHERE char_length(notes) > 2000;
ALTER TABLE stock_count_lines
    ADD CONSTRAINT stock_count_lines_notes_max_length CHECK (char_length(notes) <= 2000);

-- Coupons and the free-text fields of sales (both already bounded by the
-- write paths; nothing to cut).
UPDATE coupons SET
    type = left(type, 50),
    description = left(description, 2000),
    applies_to_id = left(applies_to_id, 100),
    image_url = left(image_url, 1000)
WHERE char_length(type) > 50 OR char_length(description) > 2000
   OR char_length(applies_to_id) > 100 OR char_length(image_url) > 1000;
ALTER TABLE coupons
    ADD CONSTRAINT coupons_type_max_length CHECK (char_length(type) <= 50),
    ADD CONSTRAINT coupons_description_max_length CHECK (char_length(description) <= 2000),
    ADD CONSTRAINT coupons_applies_to_id_max_length CHECK (char_length(applies_to_id) <= 100),
    ADD CONSTRAINT coupons_image_url_max_length CHECK (char_length(image_url) <= 1000);

ALTER TABLE sales
    ADD CONSTRAINT sales_coupon_code_max_length CHECK (char_length(coupon_code) <= 64),
    ADD CONSTRAINT sales_client_mutation_id_max_length
        CHECK (char_length(client_mutation_id) <= 200);

-- Supplier invoices and their payments.
UPDATE supplier_invoices SET
    invoice_no = left(invoice_no, 100),
    notes = left(notes, 2000)
WHERE char_length(invoice_no) > 100 OR char_length(notes) > 2000;
ALTER TABLE supplier_invoices
    ADD CONSTRAINT supplier_invoices_invoice_no_max_length CHECK (char_length(invoice_no) <= 100),
    ADD CONSTRAINT supplier_invoices_notes_max_length CHECK (char_length(notes) <= 2000);

UPDATE supplier_payments SET
    method = left(method, 50),
    reference = left(reference, 200)
WHERE char_length(method) > 50 OR char_length(reference) > 200;
ALTER TABLE supplier_payments
    ADD CONSTRAINT supplier_payments_method_max_length CHECK (char_length(method) <= 50),
    ADD CONSTRAINT supplier_payments_reference_max_length CHECK (char_length(reference) <= 200);

-- Printing: template texts (printer names and job references already have
-- their CHECKs).
UPDATE receipt_templates SET
    header_text = left(header_text, 2000),
    footer_text = left(footer_text, 2000)
WHERE char_length(header_text) > 2000 OR char_length(footer_text) > 2000;
ALTER TABLE receipt_templates
    ADD CONSTRAINT receipt_templates_header_text_max_length CHECK (char_length(header_text) <= 2000),
    ADD CONSTRAINT receipt_templates_footer_text_max_length CHECK (char_length(footer_text) <= 2000);

-- Sync: what a push stores. A change's `entity` and `op` are names of at
-- most 50 characters. A conflict keeps only the entity's own fields (plus
-- `id`, `base_rev`, `updated_at`), each bounded above, so its payload stays
-- small: 64 KiB is far above any real one. A conflict recorded before this
-- migration with a larger payload keeps only those keys, and only values of
-- at most 1000 bytes (what remains is what the server would have kept).
UPDATE push_mutations SET entity = left(entity, 50), op = left(op, 50)
WHERE char_length(entity) > 50 OR char_length(op) > 50;
ALTER TABLE push_mutations
    ADD CONSTRAINT push_mutations_entity_max_length CHECK (char_length(entity) <= 50),
    ADD CONSTRAINT push_mutations_op_max_length CHECK (char_length(op) <= 50);

UPDATE sync_conflicts SET payload = (
    SELECT coalesce(jsonb_object_agg(e.key, e.value), '{}'::jsonb)
    FROM jsonb_each(payload) AS e
    WHERE octet_length(e.value::text) <= 1000
      AND e.key IN (
        'id', 'base_rev', 'updated_at',
        -- customer
        'name', 'phone', 'national_id', 'notes', 'image_url', 'credit_limit',
        'is_credit_allowed',
        -- supplier
        'tax_number', 'contact_person', 'email', 'address', 'supplier_type',
        'lead_time_days', 'reliability_score', 'is_active',
        -- medicine
        'generic_name', 'barcode', 'category', 'form', 'strength', 'unit',
        'selling_price', 'max_public_price', 'low_stock_threshold',
        'requires_prescription', 'is_controlled', 'control_schedule',
        'vat_category', 'requires_cold_chain', 'regulator_registration_no',
        'image_key'))
WHERE octet_length(payload::text) > 65536;
ALTER TABLE sync_conflicts
    ADD CONSTRAINT sync_conflicts_client_mutation_id_max_length
        CHECK (char_length(client_mutation_id) <= 200),
    ADD CONSTRAINT sync_conflicts_payload_max_size
        CHECK (octet_length(payload::text) <= 65536);

-- Rate-limit keys carry a login email (at most 254 characters) or an address.
DELETE FROM rate_limits WHERE char_length(key) > 400;
ALTER TABLE rate_limits
    ADD CONSTRAINT rate_limits_key_max_length CHECK (char_length(key) <= 400);
