-- Tenant schema version 13: section paths.
--
-- A chunk's field terms (docs/spec.md section 4, "Field terms") count the
-- headings enclosing its section, not only its own: "Install > Linux >
-- Debian" makes a chunk of "Debian" findable by "install" and "linux" as
-- fields. The in-memory query path counts a chunk's field terms again
-- when it loads the tenant, so the chunk row keeps the path:
--
--   chunks.section_path text: the names of the headings enclosing the
--   chunk's section, outermost first, joined by a newline (no heading
--   holds one); NULL for none. Nullable, so adding it rewrites no row.
--
-- Tenants record the field rules in their tokenizer version: those
-- created or re-indexed with section paths record fields-title-path-2,
-- and their reader_min is 17, so a binary of migration 16, which has not
-- heard of the path, refuses them (503 schema_incompatible) instead of
-- indexing their chunks without it. Tenants under fields-title-section-1
-- (the nearest heading only) keep reader_min 16 and are served by both
-- releases as they were indexed, until 'cordon tenant set --fields=true'
-- re-indexes them under section paths.
--
-- create_tenant is as in migration 16, recording reader_min 17 for a
-- tokenizer version with section paths ('cordon tenant set' records it
-- too, and 16 again for a re-index without them). The downgrade drops the
-- column of the other tenants only: one with section paths keeps its
-- paths and reader_min 17, so the binary of migration 16 refuses it (a
-- release before 16 refuses its tokenizer version) and migrating up
-- again serves it as it was. 'cordon tenant set --fields=false' makes it
-- readable by older binaries.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION cordon.tenant_upgrade_13(s text) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    -- IF NOT EXISTS: a tenant with section paths keeps the column
    -- through a downgrade.
    EXECUTE format('ALTER TABLE %I.chunks ADD COLUMN IF NOT EXISTS section_path text', s);
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 13 $fn$;
-- +goose StatementEnd

SELECT cordon.apply_tenant_upgrades(name) FROM cordon.tenants ORDER BY name;

-- Tenants with section paths kept through a downgrade and up again.
UPDATE cordon.tenants SET reader_min = greatest(reader_min, 17)
WHERE tokenizer_version LIKE '%/fields-title-path-2';

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
    rmin integer;
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
    -- Field terms with section paths need this migration's section_path.
    rmin := CASE WHEN p_tokenizer_version LIKE '%/fields-title-path-2' THEN 17 ELSE 16 END;
    INSERT INTO cordon.tenants (name, schema_name, embed_model, dims, k1, b, max_words, overlap_words, tokenizer_version, bm25_statistics, incarnation, reader_min)
    VALUES (p_name, 'cordon_t_' || p_name, p_embed_model, p_dims, p_k1, p_b, p_max_words, p_overlap_words, p_tokenizer_version, p_bm25_statistics, inc, rmin);
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

-- +goose Down
-- A tenant with section paths keeps its column and reader_min 17: a binary
-- of migration 16 refuses it (503), and migrating up again finds it whole.
-- So does one of migration 18's field rules (fields-title-path-3, which
-- also count section paths; reader_min 18).
-- +goose StatementBegin
DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT schema_name FROM cordon.tenants
             WHERE schema_version >= 13 AND tokenizer_version NOT LIKE '%/fields-title-path-2'
                   AND tokenizer_version NOT LIKE '%/fields-title-path-3' LOOP
        EXECUTE format('ALTER TABLE %I.chunks DROP COLUMN section_path', r.schema_name);
    END LOOP;
    UPDATE cordon.tenants SET schema_version = 12 WHERE schema_version >= 13;
END
$do$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 12 $fn$;
-- +goose StatementEnd

DROP FUNCTION cordon.tenant_upgrade_13(text);

-- create_tenant as in migration 16.
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
