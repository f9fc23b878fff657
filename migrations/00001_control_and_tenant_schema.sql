-- Cordon's control schema and the DDL of a tenant schema.
--
-- Each tenant lives in its own schema, cordon_t_<tenant>, created by
-- cordon.create_tenant(). A tenant schema is self-contained (no foreign key or
-- sequence crosses schemas), so Citus schema-based sharding can distribute
-- tenants as they are. Its DDL lives here, in versioned functions
-- cordon.tenant_upgrade_<n>(schema), so that a later migration can upgrade every
-- existing tenant schema (see cordon.apply_tenant_upgrades).
--
-- CREATE EXTENSION may need elevated rights; a DBA can run it beforehand, and
-- then this statement is a no-op.

-- +goose Up
CREATE EXTENSION IF NOT EXISTS vector;

CREATE SCHEMA IF NOT EXISTS cordon;

-- The tenant registry, with each tenant's index settings: they decide chunk
-- boundaries and scores, so they are fixed when the tenant is created.
CREATE TABLE cordon.tenants (
    name              text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_]{0,39}$'),
    schema_name       text NOT NULL UNIQUE CHECK (schema_name = 'cordon_t_' || name),
    dims              integer NOT NULL CHECK (dims BETWEEN 1 AND 16000),
    k1                double precision NOT NULL CHECK (k1 >= 0),
    b                 double precision NOT NULL CHECK (b >= 0 AND b <= 1),
    max_words         integer NOT NULL CHECK (max_words >= 1),
    overlap_words     integer NOT NULL CHECK (overlap_words >= 0 AND overlap_words < max_words),
    tokenizer_version text NOT NULL,
    schema_version    integer NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now()
);

-- Version 1 of a tenant schema.
-- +goose StatementBegin
CREATE FUNCTION cordon.tenant_upgrade_1(s text) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    EXECUTE format('CREATE SCHEMA IF NOT EXISTS %I', s);

    -- One row per document; text kept whole so spans can be re-cited.
    EXECUTE format($ddl$
        CREATE TABLE %I.documents (
            doc_id         text COLLATE "C" PRIMARY KEY,
            classification smallint NOT NULL CHECK (classification BETWEEN 0 AND 3),
            barriers       text[] NOT NULL,
            as_of_tick     bigint NOT NULL CHECK (as_of_tick BETWEEN 0 AND 4611686018427387904),
            title          text NOT NULL DEFAULT '',
            metadata       jsonb NOT NULL DEFAULT '{}',
            text           text NOT NULL
        )$ddl$, s);

    -- One row per chunk. embedding holds the signed-hash INTEGER count vector:
    -- float32 represents every integer of magnitude <= 2^24 exactly, and Cordon
    -- refuses a chunk with a larger component (index.MaxCount), so the stored
    -- vector is exact. max_abs, the largest |component|, lets a query prove that
    -- pgvector's float32 inner product is exact (every partial sum < 2^24).
    EXECUTE format($ddl$
        CREATE TABLE %I.chunks (
            id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            chunk_id       text COLLATE "C" NOT NULL UNIQUE,
            doc_id         text COLLATE "C" NOT NULL REFERENCES %I.documents (doc_id) ON DELETE CASCADE,
            ord            integer NOT NULL,
            section        text NOT NULL,
            text           text NOT NULL,
            start_char     integer NOT NULL,
            end_char       integer NOT NULL,
            length         integer NOT NULL,
            classification smallint NOT NULL,
            barriers       text[] NOT NULL,
            as_of_tick     bigint NOT NULL,
            embedding      vector NOT NULL,
            norm_sq        bigint NOT NULL,
            max_abs        integer NOT NULL
        )$ddl$, s, s);
    EXECUTE format('CREATE INDEX ON %I.chunks (doc_id)', s);

    -- The BM25 postings: one row per (term, chunk) with the term frequency.
    EXECUTE format($ddl$
        CREATE TABLE %I.postings (
            term  text COLLATE "C" NOT NULL,
            chunk bigint NOT NULL REFERENCES %I.chunks (id) ON DELETE CASCADE,
            tf    integer NOT NULL CHECK (tf > 0),
            PRIMARY KEY (term, chunk)
        )$ddl$, s, s);
    EXECUTE format('CREATE INDEX ON %I.postings (chunk)', s);

    -- Corpus statistics, one row, updated in the same transaction as the
    -- chunks. Writers lock this row, which serialises a tenant's writes and
    -- keeps N and the length sum exact.
    EXECUTE format($ddl$
        CREATE TABLE %I.stats (
            id          boolean PRIMARY KEY DEFAULT true CHECK (id),
            n_chunks    bigint NOT NULL DEFAULT 0,
            sum_len     bigint NOT NULL DEFAULT 0,
            max_abs     integer NOT NULL DEFAULT 0
        )$ddl$, s);
    EXECUTE format('INSERT INTO %I.stats DEFAULT VALUES', s);
END
$fn$;
-- +goose StatementEnd

-- The newest tenant schema version; each migration that adds an upgrade
-- replaces this function.
-- +goose StatementBegin
CREATE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 1 $fn$;
-- +goose StatementEnd

-- Brings one tenant schema to the latest version, one upgrade at a time.
-- +goose StatementBegin
CREATE FUNCTION cordon.apply_tenant_upgrades(p_name text) RETURNS void
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

-- +goose Down
-- +goose StatementBegin
DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT schema_name FROM cordon.tenants LOOP
        EXECUTE format('DROP SCHEMA IF EXISTS %I CASCADE', r.schema_name);
    END LOOP;
END
$do$;
-- +goose StatementEnd
DROP SCHEMA cordon CASCADE;
