-- Tenant incarnations and the binaries that may read a tenant.
--
-- cordon.tenants gains two columns:
--
--   - incarnation: a number drawn from the sequence
--     cordon.tenant_incarnation when the tenant is created. A tenant dropped
--     and created again under the same name gets a new number, and a
--     sequence never hands out a number twice, so the number names one
--     life of the tenant for good. The in-memory query path keys every
--     cached index by it: an index built from one incarnation is never
--     served for another. (Until this migration the path used the stats
--     table's OID, which PostgreSQL may hand out again after a drop.)
--
--   - reader_min: the lowest Cordon migration a binary must have been built
--     with to read and write the tenant correctly. A binary whose newest
--     migration is below it refuses the tenant's requests (503) instead of
--     answering from a layout it does not understand. Migrations that keep
--     the previous release correct (expand, then contract a release later)
--     leave it alone; one that does not raises it for the tenants it
--     changes, and CHANGELOG.md says that upgrading across it needs a stop.
--
-- Both are additions only: the previous release (migration 15) reads and
-- writes a database migrated to 16 as before (the CI's compatibility check,
-- scripts/compat-check.sh, replays every golden script with that release's
-- binary against this schema).
--
-- Values are drawn into variables before they are written, so that on a
-- Citus cluster, where cordon.tenants is a reference table, every node's
-- copy receives the same constant.

-- +goose Up
CREATE SEQUENCE cordon.tenant_incarnation AS bigint NO CYCLE;

ALTER TABLE cordon.tenants ADD COLUMN incarnation bigint;
ALTER TABLE cordon.tenants ADD COLUMN reader_min integer NOT NULL DEFAULT 16;

-- +goose StatementBegin
DO $do$
DECLARE
    r record;
    n bigint;
BEGIN
    FOR r IN SELECT name FROM cordon.tenants ORDER BY name LOOP
        n := nextval('cordon.tenant_incarnation');
        UPDATE cordon.tenants SET incarnation = n WHERE name = r.name;
    END LOOP;
END
$do$;
-- +goose StatementEnd

ALTER TABLE cordon.tenants ALTER COLUMN incarnation SET NOT NULL;
ALTER TABLE cordon.tenants ADD CONSTRAINT tenants_incarnation_key UNIQUE (incarnation);

-- create_tenant as in migration 13, drawing the new tenant's incarnation.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.create_tenant(
    p_name text, p_dims integer, p_k1 double precision, p_b double precision,
    p_max_words integer, p_overlap_words integer, p_tokenizer_version text,
    p_bm25_statistics text, p_embed_model text
) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    t cordon.tenants;
    citus boolean := cordon.citus_workers() > 0;
    sharding text;
    inc bigint;
BEGIN
    IF citus THEN
        -- Before the registry is read: a table first read as a local
        -- table cannot become a reference table in the same transaction.
        PERFORM cordon.citus_distribute_registry();
    END IF;
    -- Serialise concurrent creates of the same tenant.
    PERFORM pg_advisory_xact_lock(hashtext('cordon.create_tenant:' || p_name));
    SELECT * INTO t FROM cordon.tenants WHERE name = p_name;
    IF FOUND THEN
        IF (t.embed_model, t.dims, t.k1, t.b, t.max_words, t.overlap_words, t.tokenizer_version, t.bm25_statistics)
           IS DISTINCT FROM (p_embed_model, p_dims, p_k1, p_b, p_max_words, p_overlap_words, p_tokenizer_version, p_bm25_statistics) THEN
            RAISE EXCEPTION 'tenant % exists with other index settings (model %, dims %, k1 %, b %, max_words %, overlap_words %, tokenizer %, bm25_statistics %)',
                p_name, t.embed_model, t.dims, t.k1, t.b, t.max_words, t.overlap_words, t.tokenizer_version, t.bm25_statistics
                USING ERRCODE = 'CD001';
        END IF;
        RETURN false;
    END IF;
    inc := nextval('cordon.tenant_incarnation');
    INSERT INTO cordon.tenants (name, schema_name, embed_model, dims, k1, b, max_words, overlap_words, tokenizer_version, bm25_statistics, incarnation)
    VALUES (p_name, 'cordon_t_' || p_name, p_embed_model, p_dims, p_k1, p_b, p_max_words, p_overlap_words, p_tokenizer_version, p_bm25_statistics, inc);
    IF citus THEN
        sharding := current_setting('citus.enable_schema_based_sharding');
        PERFORM set_config('citus.enable_schema_based_sharding', 'off', true);
    END IF;
    PERFORM cordon.apply_tenant_upgrades(p_name);
    IF citus THEN
        PERFORM set_config('citus.enable_schema_based_sharding', sharding, true);
        PERFORM cordon.distribute_tenant(p_name);
    END IF;
    RETURN true;
END
$fn$;
-- +goose StatementEnd

-- drop_tenant as in migration 3, taking the tenant's locks in the order
-- its reads and writes take them, so that a drop under load waits for them
-- instead of deadlocking with them: first the tenant's write lock (every
-- write takes it, shared, before anything else; class 1467115892 is
-- store/postgres's writeLockClass), then the stats table (every read's
-- first statement reads it), and only then the schema's other tables.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.drop_tenant(p_name text) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    s text;
BEGIN
    SELECT schema_name INTO s FROM cordon.tenants WHERE name = p_name;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM pg_advisory_xact_lock(1467115892, hashtext(s));
    IF to_regclass(format('%I.stats', s)) IS NOT NULL THEN
        EXECUTE format('LOCK TABLE %I.stats IN ACCESS EXCLUSIVE MODE', s);
    END IF;
    DELETE FROM cordon.tenants WHERE name = p_name;
    IF NOT FOUND THEN
        RETURN false; -- dropped by another session meanwhile
    END IF;
    EXECUTE format('DROP SCHEMA IF EXISTS %I CASCADE', s);
    RETURN true;
END
$fn$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.drop_tenant(p_name text) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    s text;
BEGIN
    DELETE FROM cordon.tenants WHERE name = p_name RETURNING schema_name INTO s;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    EXECUTE format('DROP SCHEMA IF EXISTS %I CASCADE', s);
    RETURN true;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.create_tenant(
    p_name text, p_dims integer, p_k1 double precision, p_b double precision,
    p_max_words integer, p_overlap_words integer, p_tokenizer_version text,
    p_bm25_statistics text, p_embed_model text
) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    t cordon.tenants;
    citus boolean := cordon.citus_workers() > 0;
    sharding text;
BEGIN
    IF citus THEN
        PERFORM cordon.citus_distribute_registry();
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('cordon.create_tenant:' || p_name));
    SELECT * INTO t FROM cordon.tenants WHERE name = p_name;
    IF FOUND THEN
        IF (t.embed_model, t.dims, t.k1, t.b, t.max_words, t.overlap_words, t.tokenizer_version, t.bm25_statistics)
           IS DISTINCT FROM (p_embed_model, p_dims, p_k1, p_b, p_max_words, p_overlap_words, p_tokenizer_version, p_bm25_statistics) THEN
            RAISE EXCEPTION 'tenant % exists with other index settings (model %, dims %, k1 %, b %, max_words %, overlap_words %, tokenizer %, bm25_statistics %)',
                p_name, t.embed_model, t.dims, t.k1, t.b, t.max_words, t.overlap_words, t.tokenizer_version, t.bm25_statistics
                USING ERRCODE = 'CD001';
        END IF;
        RETURN false;
    END IF;
    INSERT INTO cordon.tenants (name, schema_name, embed_model, dims, k1, b, max_words, overlap_words, tokenizer_version, bm25_statistics)
    VALUES (p_name, 'cordon_t_' || p_name, p_embed_model, p_dims, p_k1, p_b, p_max_words, p_overlap_words, p_tokenizer_version, p_bm25_statistics);
    IF citus THEN
        sharding := current_setting('citus.enable_schema_based_sharding');
        PERFORM set_config('citus.enable_schema_based_sharding', 'off', true);
    END IF;
    PERFORM cordon.apply_tenant_upgrades(p_name);
    IF citus THEN
        PERFORM set_config('citus.enable_schema_based_sharding', sharding, true);
        PERFORM cordon.distribute_tenant(p_name);
    END IF;
    RETURN true;
END
$fn$;
-- +goose StatementEnd

ALTER TABLE cordon.tenants DROP CONSTRAINT tenants_incarnation_key;
ALTER TABLE cordon.tenants DROP COLUMN reader_min;
ALTER TABLE cordon.tenants DROP COLUMN incarnation;
DROP SEQUENCE cordon.tenant_incarnation;
