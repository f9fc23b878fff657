-- Tenant schema version 2: an index version and a document content hash.
--
-- stats.version counts committed writes to a tenant; a retrieval reports the
-- version it read (audit records cite it, and a cache can check it to stay
-- coherent). documents.content_hash (BLAKE2b-256 of the text) lets ingestion
-- skip unchanged documents. Existing tenant schemas are upgraded in place.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION cordon.tenant_upgrade_2(s text) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    EXECUTE format('ALTER TABLE %I.stats ADD COLUMN version bigint NOT NULL DEFAULT 0', s);
    EXECUTE format('ALTER TABLE %I.documents ADD COLUMN content_hash bytea', s);
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 2 $fn$;
-- +goose StatementEnd

SELECT cordon.apply_tenant_upgrades(name) FROM cordon.tenants ORDER BY name;

-- +goose Down
-- +goose StatementBegin
DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT schema_name FROM cordon.tenants WHERE schema_version >= 2 LOOP
        EXECUTE format('ALTER TABLE %I.stats DROP COLUMN version', r.schema_name);
        EXECUTE format('ALTER TABLE %I.documents DROP COLUMN content_hash', r.schema_name);
    END LOOP;
    UPDATE cordon.tenants SET schema_version = 1 WHERE schema_version >= 2;
END
$do$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 1 $fn$;
-- +goose StatementEnd

DROP FUNCTION cordon.tenant_upgrade_2(text);
