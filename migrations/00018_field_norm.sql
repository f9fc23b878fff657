-- Length-normalised field frequencies (no schema change).
--
-- Tenants created or re-indexed with field terms from this release on
-- record the field rules fields-title-path-3 in their tokenizer version
-- (docs/spec.md section 4, "Field terms"): a field term's frequency is
-- its count scaled by the length of the chunk's field text, so a word of
-- a one-word title counts more than one of a long title. Their reader_min
-- is 18, so a binary of migration 17, which would read those frequencies
-- as counts, refuses them (503 schema_incompatible) instead of answering.
-- Tenants under fields-title-path-2 or fields-title-section-1 keep their
-- reader_min (17, 16) and are served by both releases as they were
-- indexed, until 'cordon tenant set --fields=true' re-indexes them under
-- the current rules.
--
-- create_tenant is as in migration 17, recording reader_min 18 for the
-- new rules ('cordon tenant set' records it too). The downgrade restores
-- migration 17's create_tenant and leaves such tenants at reader_min 18:
-- migration 17's binaries refuse them, and migrating up again serves them
-- as they were. 'cordon tenant set --fields=false' makes one readable by
-- older binaries (reader_min 16). Migration 17's downgrade keeps the
-- section_path column of these tenants too, as of its own.

-- +goose Up
-- Tenants of the current rules kept through a downgrade and up again.
UPDATE cordon.tenants SET reader_min = greatest(reader_min, 18)
WHERE tokenizer_version LIKE '%/fields-title-path-3';

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
    rmin := CASE WHEN p_tokenizer_version LIKE '%/fields-title-path-3' THEN 18
                 WHEN p_tokenizer_version LIKE '%/fields-title-path-2' THEN 17 ELSE 16 END;
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
-- create_tenant as in migration 17.
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
