-- Tenant schema version 7: keyed audit chains.
--
-- audit.key_id names the key whose HMAC-SHA256 makes the row's hash (see
-- store/postgres/audit.go): the service holds the keys, the database never
-- does, so rewriting a row and recomputing every later hash needs the key,
-- not only write access to the table. '' marks a row chained with plain
-- SHA-256 (rows written before this version, or by a service run with
-- --audit-unkeyed); existing rows keep '' and still verify. The key id is
-- stored so that keys can rotate: 'cordon audit verify' checks each row with
-- the key its id names.
--
-- Adding the column rewrites no row (a constant default), so the
-- append-only trigger does not fire. The downgrade drops the column: rows
-- written with a key no longer verify with an older binary.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION cordon.tenant_upgrade_7(s text) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    EXECUTE format($ddl$
        ALTER TABLE %I.audit ADD COLUMN key_id text NOT NULL DEFAULT ''
            CHECK (key_id ~ '^[A-Za-z0-9._-]{0,64}$')$ddl$, s);
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 7 $fn$;
-- +goose StatementEnd

SELECT cordon.apply_tenant_upgrades(name) FROM cordon.tenants ORDER BY name;

-- +goose Down
-- +goose StatementBegin
DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT schema_name FROM cordon.tenants WHERE schema_version >= 7 LOOP
        EXECUTE format('ALTER TABLE %I.audit DROP COLUMN key_id', r.schema_name);
    END LOOP;
    UPDATE cordon.tenants SET schema_version = 6 WHERE schema_version >= 7;
END
$do$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 6 $fn$;
-- +goose StatementEnd

DROP FUNCTION cordon.tenant_upgrade_7(text);
