-- Tenant schema version 4: a change log for coherent query caches.
--
-- Every put and delete bumps stats.version and records (version, doc_id) in
-- <schema>.changes in the same transaction. A service that keeps a tenant's
-- index in memory reads stats.version in its query snapshot and, when it is
-- behind, re-reads only the documents changed since: a writer reads its own
-- writes and every replica serves committed state within one query. Old rows
-- are pruned by writers; a cache further behind than the log reloads fully.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION cordon.tenant_upgrade_4(s text) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    EXECUTE format($ddl$
        CREATE TABLE %I.changes (
            version bigint NOT NULL,
            doc_id  text COLLATE "C" NOT NULL,
            PRIMARY KEY (version, doc_id)
        )$ddl$, s);
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 4 $fn$;
-- +goose StatementEnd

SELECT cordon.apply_tenant_upgrades(name) FROM cordon.tenants ORDER BY name;

-- +goose Down
-- +goose StatementBegin
DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT schema_name FROM cordon.tenants WHERE schema_version >= 4 LOOP
        EXECUTE format('DROP TABLE %I.changes', r.schema_name);
    END LOOP;
    UPDATE cordon.tenants SET schema_version = 3 WHERE schema_version >= 4;
END
$do$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 3 $fn$;
-- +goose StatementEnd

DROP FUNCTION cordon.tenant_upgrade_4(text);
