-- Tenant schema version 3: an append-only, hash-chained audit log.
--
-- Every retrieve, ground and assemble served over HTTP appends one row to
-- <schema>.audit. Each row carries the SHA-256 of the previous row's hash and
-- its own canonical content (computed by the service, see
-- store/postgres/audit.go), so changing, inserting or deleting a row in the
-- middle of the chain is detected by 'cordon audit verify'.
--
-- UPDATE, DELETE and TRUNCATE are revoked from PUBLIC, and a trigger refuses
-- UPDATE and DELETE for every role, the owner included (an owner can still
-- disable the trigger: that is what the hash chain is for). The grants for a
-- separate service role are in docs/security.md. Existing tenant schemas
-- are upgraded in place.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION cordon.audit_append_only() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'CD002';
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION cordon.tenant_upgrade_3(s text) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    EXECUTE format($ddl$
        CREATE TABLE %I.audit (
            seq                     bigint PRIMARY KEY CHECK (seq >= 1),
            at                      timestamptz NOT NULL,
            sub                     text NOT NULL,
            op                      text NOT NULL CHECK (op IN ('retrieve', 'ground', 'assemble')),
            query                   text NOT NULL,
            policy                  text NOT NULL,
            chunk_ids               text[] NOT NULL,
            considered              bigint NOT NULL,
            excluded_by_entitlement bigint NOT NULL,
            excluded_by_freshness   bigint NOT NULL,
            degraded                text[] NOT NULL,
            index_version           bigint NOT NULL,
            request_id              text NOT NULL,
            prev_hash               bytea NOT NULL,
            hash                    bytea NOT NULL UNIQUE
        )$ddl$, s);
    EXECUTE format('CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON %I.audit FOR EACH ROW EXECUTE FUNCTION cordon.audit_append_only()', s);
    EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON %I.audit FROM PUBLIC', s);
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 3 $fn$;
-- +goose StatementEnd

SELECT cordon.apply_tenant_upgrades(name) FROM cordon.tenants ORDER BY name;

-- +goose Down
-- +goose StatementBegin
DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT schema_name FROM cordon.tenants WHERE schema_version >= 3 LOOP
        EXECUTE format('DROP TABLE %I.audit', r.schema_name);
    END LOOP;
    UPDATE cordon.tenants SET schema_version = 2 WHERE schema_version >= 3;
END
$do$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 2 $fn$;
-- +goose StatementEnd

DROP FUNCTION cordon.tenant_upgrade_3(text);
DROP FUNCTION cordon.audit_append_only();
