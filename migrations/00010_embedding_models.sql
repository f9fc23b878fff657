-- Embedding models: a tenant records the model of its dense side, and can
-- move to another one without downtime (cordon tenant reembed).
--
-- cordon.tenants.embed_model is 'hash' (signed feature hashing, SPEC
-- section 3) or the name a provider serves a model under; dims is that
-- model's vector length. Vectors of two models are never compared: a query
-- names the model it was embedded with and a store refuses another.
--
-- A re-embedding runs in three states (reembed_state):
--   'none'      one model;
--   'backfill'  next_model/next_dims name the target; every write stores a
--               vector of both models (embedding and embedding_next) and
--               the backfill fills embedding_next of older chunks;
--   'cutover'   the models have been swapped in one transaction: embedding
--               holds the target's vectors, embedding_next the previous
--               model's, next_model names the previous model and writes go
--               on storing both, so a roll-back is the same swap again.
-- Finishing clears next_model and embedding_next.
--
-- Tenant schema version 8 adds the second vector slot to chunks (nullable,
-- so adding it rewrites no row) and its largest |component| to stats.

-- +goose Up
ALTER TABLE cordon.tenants
    ADD COLUMN embed_model text NOT NULL DEFAULT 'hash'
        CHECK (embed_model ~ '^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$'),
    ADD COLUMN next_model text
        CHECK (next_model ~ '^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$'),
    ADD COLUMN next_dims integer CHECK (next_dims BETWEEN 1 AND 16000),
    ADD COLUMN reembed_state text NOT NULL DEFAULT 'none'
        CHECK (reembed_state IN ('none', 'backfill', 'cutover')),
    ADD CONSTRAINT tenants_reembed_check CHECK (
        (next_model IS NULL) = (next_dims IS NULL)
        AND (reembed_state = 'none') = (next_model IS NULL));

-- +goose StatementBegin
CREATE FUNCTION cordon.tenant_upgrade_8(s text) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    EXECUTE format($ddl$
        ALTER TABLE %I.chunks
            ADD COLUMN embedding_next vector,
            ADD COLUMN norm_sq_next bigint,
            ADD COLUMN max_abs_next integer$ddl$, s);
    EXECUTE format($ddl$
        ALTER TABLE %I.stats ADD COLUMN max_abs_next integer NOT NULL DEFAULT 0$ddl$, s);
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 8 $fn$;
-- +goose StatementEnd

DROP FUNCTION cordon.create_tenant(text, integer, double precision, double precision, integer, integer, text, text);

-- +goose StatementBegin
CREATE FUNCTION cordon.create_tenant(
    p_name text, p_dims integer, p_k1 double precision, p_b double precision,
    p_max_words integer, p_overlap_words integer, p_tokenizer_version text,
    p_bm25_statistics text, p_embed_model text
) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    t cordon.tenants;
BEGIN
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
    INSERT INTO cordon.tenants (name, schema_name, embed_model, dims, k1, b, max_words, overlap_words, tokenizer_version, bm25_statistics)
    VALUES (p_name, 'cordon_t_' || p_name, p_embed_model, p_dims, p_k1, p_b, p_max_words, p_overlap_words, p_tokenizer_version, p_bm25_statistics);
    PERFORM cordon.apply_tenant_upgrades(p_name);
    RETURN true;
END
$fn$;
-- +goose StatementEnd

SELECT cordon.apply_tenant_upgrades(name) FROM cordon.tenants ORDER BY name;

-- +goose Down
-- A tenant mid-re-embedding or on a model other than hashing cannot go
-- back: the older binary would score its model's vectors as hash counts.
-- +goose StatementBegin
DO $do$
DECLARE
    r record;
BEGIN
    IF EXISTS (SELECT 1 FROM cordon.tenants WHERE embed_model <> 'hash' OR reembed_state <> 'none') THEN
        RAISE EXCEPTION 'tenants use embedding models other than hash or are re-embedding: re-embed them to hash (cordon tenant reembed NAME --model hash) before downgrading';
    END IF;
    FOR r IN SELECT schema_name FROM cordon.tenants WHERE schema_version >= 8 LOOP
        EXECUTE format('ALTER TABLE %I.chunks DROP COLUMN embedding_next, DROP COLUMN norm_sq_next, DROP COLUMN max_abs_next', r.schema_name);
        EXECUTE format('ALTER TABLE %I.stats DROP COLUMN max_abs_next', r.schema_name);
    END LOOP;
    UPDATE cordon.tenants SET schema_version = 7 WHERE schema_version >= 8;
END
$do$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 7 $fn$;
-- +goose StatementEnd

DROP FUNCTION cordon.tenant_upgrade_8(text);

DROP FUNCTION cordon.create_tenant(text, integer, double precision, double precision, integer, integer, text, text, text);

-- +goose StatementBegin
CREATE FUNCTION cordon.create_tenant(
    p_name text, p_dims integer, p_k1 double precision, p_b double precision,
    p_max_words integer, p_overlap_words integer, p_tokenizer_version text,
    p_bm25_statistics text
) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    t cordon.tenants;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('cordon.create_tenant:' || p_name));
    SELECT * INTO t FROM cordon.tenants WHERE name = p_name;
    IF FOUND THEN
        IF (t.dims, t.k1, t.b, t.max_words, t.overlap_words, t.tokenizer_version, t.bm25_statistics)
           IS DISTINCT FROM (p_dims, p_k1, p_b, p_max_words, p_overlap_words, p_tokenizer_version, p_bm25_statistics) THEN
            RAISE EXCEPTION 'tenant % exists with other index settings (dims %, k1 %, b %, max_words %, overlap_words %, tokenizer %, bm25_statistics %)',
                p_name, t.dims, t.k1, t.b, t.max_words, t.overlap_words, t.tokenizer_version, t.bm25_statistics
                USING ERRCODE = 'CD001';
        END IF;
        RETURN false;
    END IF;
    INSERT INTO cordon.tenants (name, schema_name, dims, k1, b, max_words, overlap_words, tokenizer_version, bm25_statistics)
    VALUES (p_name, 'cordon_t_' || p_name, p_dims, p_k1, p_b, p_max_words, p_overlap_words, p_tokenizer_version, p_bm25_statistics);
    PERFORM cordon.apply_tenant_upgrades(p_name);
    RETURN true;
END
$fn$;
-- +goose StatementEnd

ALTER TABLE cordon.tenants DROP CONSTRAINT tenants_reembed_check,
    DROP COLUMN reembed_state, DROP COLUMN next_dims, DROP COLUMN next_model, DROP COLUMN embed_model;
