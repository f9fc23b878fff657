-- Service roles: the grants a least-privilege service role needs, applied
-- by Cordon itself.
--
-- cordon.service_roles lists the roles the service connects as (registered
-- with cordon.grant_service_role, or 'cordon tenant grant ROLE'). Each gets
-- read access to the tenant registry and the migration bookkeeping, and on
-- every tenant schema: read and write on its tables and sequences, but only
-- INSERT and SELECT on the audit log. apply_tenant_upgrades, which creates
-- a tenant's schema and later upgrades it, re-applies the grants, so a tenant
-- created later, and a table a later migration adds, is granted without
-- anyone re-running a grant block. The functions run as their caller (the
-- owner role): they grant only what the caller owns. The downgrade keeps
-- the grants already made.

-- +goose Up
CREATE TABLE cordon.service_roles (
    role_name text PRIMARY KEY
);

-- Grants role r what serving needs on tenant schema s.
-- +goose StatementBegin
CREATE FUNCTION cordon.grant_service_tenant(r text, s text) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', s, r);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I TO %I', s, r);
    EXECUTE format('GRANT USAGE ON ALL SEQUENCES IN SCHEMA %I TO %I', s, r);
    IF to_regclass(format('%I.audit', s)) IS NOT NULL THEN
        EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON %I.audit FROM %I', s, r);
    END IF;
END
$fn$;
-- +goose StatementEnd

-- Grants role r what serving needs outside tenant schemas.
-- +goose StatementBegin
CREATE FUNCTION cordon.grant_service_control(r text) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA cordon TO %I', r);
    EXECUTE format('GRANT SELECT ON cordon.tenants TO %I', r);
    IF to_regclass('public.goose_db_version') IS NOT NULL THEN
        EXECUTE format('GRANT SELECT ON public.goose_db_version TO %I', r);
    END IF;
END
$fn$;
-- +goose StatementEnd

-- Applies every registered service role's grants to tenant schema s. A
-- registered role that no longer exists is skipped with a warning.
-- +goose StatementBegin
CREATE FUNCTION cordon.apply_service_grants(s text) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    r text;
BEGIN
    FOR r IN SELECT role_name FROM cordon.service_roles ORDER BY role_name LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            RAISE WARNING 'service role % does not exist: no grants applied (remove it with cordon.revoke_service_role)', r;
            CONTINUE;
        END IF;
        PERFORM cordon.grant_service_control(r);
        PERFORM cordon.grant_service_tenant(r, s);
    END LOOP;
END
$fn$;
-- +goose StatementEnd

-- Registers p_role as a service role and grants it on every tenant.
-- +goose StatementBegin
CREATE FUNCTION cordon.grant_service_role(p_role text) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    s text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = p_role) THEN
        RAISE EXCEPTION 'role "%" does not exist', p_role USING ERRCODE = '42704';
    END IF;
    IF p_role = current_user THEN
        RAISE EXCEPTION 'role "%" runs the migrations and owns the tenants: the service role must be another role', p_role
            USING ERRCODE = '22023';
    END IF;
    INSERT INTO cordon.service_roles (role_name) VALUES (p_role) ON CONFLICT DO NOTHING;
    PERFORM cordon.grant_service_control(p_role);
    FOR s IN SELECT schema_name FROM cordon.tenants ORDER BY name LOOP
        PERFORM cordon.grant_service_tenant(p_role, s);
    END LOOP;
END
$fn$;
-- +goose StatementEnd

-- Unregisters p_role and revokes what grant_service_role granted.
-- +goose StatementBegin
CREATE FUNCTION cordon.revoke_service_role(p_role text) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    s text;
BEGIN
    DELETE FROM cordon.service_roles WHERE role_name = p_role;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = p_role) THEN
        RETURN true;
    END IF;
    FOR s IN SELECT schema_name FROM cordon.tenants ORDER BY name LOOP
        EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM %I', s, p_role);
        EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA %I FROM %I', s, p_role);
        EXECUTE format('REVOKE USAGE ON SCHEMA %I FROM %I', s, p_role);
    END LOOP;
    EXECUTE format('REVOKE SELECT ON cordon.tenants FROM %I', p_role);
    EXECUTE format('REVOKE USAGE ON SCHEMA cordon FROM %I', p_role);
    IF to_regclass('public.goose_db_version') IS NOT NULL THEN
        EXECUTE format('REVOKE SELECT ON public.goose_db_version FROM %I', p_role);
    END IF;
    RETURN true;
END
$fn$;
-- +goose StatementEnd

-- apply_tenant_upgrades as in migration 1, then the service grants.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.apply_tenant_upgrades(p_name text) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v integer;
    s text;
BEGIN
    SELECT schema_version, schema_name INTO v, s FROM cordon.tenants WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'tenant % is not registered', p_name;
    END IF;
    WHILE v < cordon.tenant_latest_version() LOOP
        v := v + 1;
        EXECUTE format('SELECT cordon.tenant_upgrade_%s(%L)', v, s);
    END LOOP;
    UPDATE cordon.tenants SET schema_version = v WHERE name = p_name;
    PERFORM cordon.apply_service_grants(s);
END
$fn$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.apply_tenant_upgrades(p_name text) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v integer;
    s text;
BEGIN
    SELECT schema_version, schema_name INTO v, s FROM cordon.tenants WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'tenant % is not registered', p_name;
    END IF;
    WHILE v < cordon.tenant_latest_version() LOOP
        v := v + 1;
        EXECUTE format('SELECT cordon.tenant_upgrade_%s(%L)', v, s);
    END LOOP;
    UPDATE cordon.tenants SET schema_version = v WHERE name = p_name;
END
$fn$;
-- +goose StatementEnd

DROP FUNCTION cordon.revoke_service_role(text);
DROP FUNCTION cordon.grant_service_role(text);
DROP FUNCTION cordon.apply_service_grants(text);
DROP FUNCTION cordon.grant_service_control(text);
DROP FUNCTION cordon.grant_service_tenant(text, text);
DROP TABLE cordon.service_roles;
