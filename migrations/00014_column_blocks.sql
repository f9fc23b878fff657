-- Tenant schema version 11: column blocks, the SQL query path's copy of
-- what it reads of every chunk.
--
-- A query ranked in SQL reads, for every chunk of the tenant, its length,
-- norm, labels, as_of_tick and document, and its vector's components on
-- the query's nonzero dimensions. Read from the chunks table, that is a
-- heap row of about 1.8 KB per chunk through the executor. From version 11
-- the segments table also holds column blocks: rows whose cols is not
-- NULL, holding a set of chunks as columns (store/postgres/colblock.go
-- and docs/architecture.md, "Column blocks", give the layout byte for byte):
--
--   segments (block, postings, cols, dims, cols_n, cols_width)
--
--   - block is the negative of a number drawn from postings_block (postings
--     segments keep positive numbers);
--   - cols holds the chunks' ids, lengths, norms, labels, ticks and
--     documents, and the ids of chunks deleted by the write that added the
--     row (tombstones); cols_n counts the chunks;
--   - dims holds the vectors dimension by dimension: cols_n components of
--     cols_width bytes (1, 2 or 4, little-endian, signed) per dimension, so
--     a reader takes the query's dimensions with substring();
--   - postings holds the row's size for merging: its chunks plus its
--     tombstones (at least 1).
--
-- A write adds one column block, merges fold them size-tiered, and a chunk
-- is live when some block lists it and no block lists it as deleted
-- (chunk ids are never reused). stats.cols_ok says the blocks cover every
-- chunk; it is false for a tenant that held chunks before this version,
-- and the first write after the upgrade builds the blocks from the chunks
-- table. Until then the SQL path reads the chunks table, as before.
--
-- The downgrade deletes the column blocks and drops the columns.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION cordon.tenant_upgrade_11(s text) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    -- One subcommand a statement, as Citus wants on distributed tables.
    EXECUTE format('ALTER TABLE %I.segments ADD COLUMN cols bytea', s);
    EXECUTE format('ALTER TABLE %I.segments ADD COLUMN dims bytea', s);
    EXECUTE format('ALTER TABLE %I.segments ADD COLUMN cols_n integer', s);
    EXECUTE format('ALTER TABLE %I.segments ADD COLUMN cols_width smallint', s);
    EXECUTE format($ddl$
        ALTER TABLE %I.segments ADD CONSTRAINT segments_cols_check CHECK (
            cols IS NULL OR (dims IS NOT NULL AND cols_n >= 0 AND cols_width IN (1, 2, 4)))$ddl$, s);
    -- Uncompressed out-of-line storage: substring() then reads only the
    -- TOAST chunks of the slices it takes, and nothing is decompressed.
    BEGIN
        EXECUTE format('ALTER TABLE %I.segments ALTER COLUMN dims SET STORAGE EXTERNAL', s);
        EXECUTE format('ALTER TABLE %I.segments ALTER COLUMN cols SET STORAGE EXTERNAL', s);
    EXCEPTION WHEN feature_not_supported THEN
        RAISE NOTICE 'column storage cannot be set here: % keeps compressed column blocks', s;
    END;
    EXECUTE format('ALTER TABLE %I.stats ADD COLUMN cols_ok boolean NOT NULL DEFAULT true', s);
    EXECUTE format('UPDATE %1$I.stats SET cols_ok = NOT EXISTS (SELECT 1 FROM %1$I.chunks)', s);
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 11 $fn$;
-- +goose StatementEnd

SELECT cordon.apply_tenant_upgrades(name) FROM cordon.tenants ORDER BY name;

-- +goose Down
-- +goose StatementBegin
DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT schema_name FROM cordon.tenants WHERE schema_version >= 11 LOOP
        EXECUTE format('DELETE FROM %I.segments WHERE cols IS NOT NULL', r.schema_name);
        EXECUTE format('ALTER TABLE %I.segments DROP CONSTRAINT segments_cols_check', r.schema_name);
        EXECUTE format('ALTER TABLE %I.segments DROP COLUMN cols_width', r.schema_name);
        EXECUTE format('ALTER TABLE %I.segments DROP COLUMN cols_n', r.schema_name);
        EXECUTE format('ALTER TABLE %I.segments DROP COLUMN dims', r.schema_name);
        EXECUTE format('ALTER TABLE %I.segments DROP COLUMN cols', r.schema_name);
        EXECUTE format('ALTER TABLE %I.stats DROP COLUMN cols_ok', r.schema_name);
    END LOOP;
    UPDATE cordon.tenants SET schema_version = 10 WHERE schema_version >= 11;
END
$do$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 10 $fn$;
-- +goose StatementEnd

DROP FUNCTION cordon.tenant_upgrade_11(text);
