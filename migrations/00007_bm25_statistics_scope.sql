-- BM25 statistics scope (tenant schema version 6).
--
-- A tenant's bm25_statistics setting says over which chunks N, the length
-- sum and df are taken: 'entitled' (the chunks the principal may see, so no
-- score depends on hidden chunks) or 'tenant' (all current chunks). Tenants
-- that exist when this migration runs keep 'tenant', the ranking they had;
-- tenants created afterwards default to 'entitled'. The setting changes
-- scores only, so it can be switched on a live tenant without re-indexing.
--
-- <schema>.label_stats keeps the number of current chunks and their length
-- sum per label set (classification, barriers), maintained in the write
-- transaction with stats: a query sums the label sets its principal may see
-- instead of scanning the tenant's chunks.

-- +goose Up
ALTER TABLE cordon.tenants
    ADD COLUMN bm25_statistics text NOT NULL DEFAULT 'tenant'
    CHECK (bm25_statistics IN ('entitled', 'tenant'));
ALTER TABLE cordon.tenants ALTER COLUMN bm25_statistics SET DEFAULT 'entitled';

-- +goose StatementBegin
CREATE FUNCTION cordon.tenant_upgrade_6(s text) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    EXECUTE format($ddl$
        CREATE TABLE %I.label_stats (
            classification smallint NOT NULL,
            barriers       text[] NOT NULL,
            n_chunks       bigint NOT NULL CHECK (n_chunks >= 0),
            sum_len        bigint NOT NULL CHECK (sum_len >= 0),
            PRIMARY KEY (classification, barriers)
        )$ddl$, s);
    EXECUTE format($ddl$
        INSERT INTO %1$I.label_stats (classification, barriers, n_chunks, sum_len)
        SELECT classification, barriers, count(*), sum(length)
        FROM %1$I.chunks GROUP BY classification, barriers$ddl$, s);
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 6 $fn$;
-- +goose StatementEnd

-- create_tenant takes the scope too; an existing tenant with another scope
-- is an error like any other setting (change it with set_bm25_statistics).
DROP FUNCTION cordon.create_tenant(text, integer, double precision, double precision, integer, integer, text);

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
    -- Serialise concurrent creates of the same tenant.
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

SELECT cordon.apply_tenant_upgrades(name) FROM cordon.tenants ORDER BY name;

-- +goose Down
-- +goose StatementBegin
DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT schema_name FROM cordon.tenants WHERE schema_version >= 6 LOOP
        EXECUTE format('DROP TABLE %I.label_stats', r.schema_name);
    END LOOP;
    UPDATE cordon.tenants SET schema_version = 5 WHERE schema_version >= 6;
END
$do$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 5 $fn$;
-- +goose StatementEnd

DROP FUNCTION cordon.create_tenant(text, integer, double precision, double precision, integer, integer, text, text);

-- +goose StatementBegin
CREATE FUNCTION cordon.create_tenant(
    p_name text, p_dims integer, p_k1 double precision, p_b double precision,
    p_max_words integer, p_overlap_words integer, p_tokenizer_version text
) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    t cordon.tenants;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('cordon.create_tenant:' || p_name));
    SELECT * INTO t FROM cordon.tenants WHERE name = p_name;
    IF FOUND THEN
        IF (t.dims, t.k1, t.b, t.max_words, t.overlap_words, t.tokenizer_version)
           IS DISTINCT FROM (p_dims, p_k1, p_b, p_max_words, p_overlap_words, p_tokenizer_version) THEN
            RAISE EXCEPTION 'tenant % exists with other index settings (dims %, k1 %, b %, max_words %, overlap_words %, tokenizer %)',
                p_name, t.dims, t.k1, t.b, t.max_words, t.overlap_words, t.tokenizer_version
                USING ERRCODE = 'CD001';
        END IF;
        RETURN false;
    END IF;
    INSERT INTO cordon.tenants (name, schema_name, dims, k1, b, max_words, overlap_words, tokenizer_version)
    VALUES (p_name, 'cordon_t_' || p_name, p_dims, p_k1, p_b, p_max_words, p_overlap_words, p_tokenizer_version);
    PERFORM cordon.apply_tenant_upgrades(p_name);
    RETURN true;
END
$fn$;
-- +goose StatementEnd

DROP FUNCTION cordon.tenant_upgrade_6(text);
ALTER TABLE cordon.tenants DROP COLUMN bm25_statistics;
