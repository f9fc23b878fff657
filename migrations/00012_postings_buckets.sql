-- Tenant schema version 10: the postings of rare terms share rows.
--
-- A write adds one postings row per distinct term of its batch, and most
-- of those terms are rare: in a segment of a few hundred chunks, about 60%
-- of the terms occur in one chunk and 90% in at most four. Each such row
-- costs a heap tuple and an entry in each of the table's two B-trees for a
-- posting or two, and inserting those rows was most of the server's work
-- in a bulk ingest. From version 10 a segment keeps the terms with few
-- postings in shared rows, one per bucket of a hash of the term:
--
--   postings (term, block, n, chunks, tfs, terms)
--
--   - a term row, as before: term is the term, terms is NULL;
--   - a bucket row: term is the bucket's key ('#' and two hexadecimal
--     digits, never a token: tokens are letters and numbers only), and
--     terms names the term of each posting, parallel to chunks and tfs,
--     ordered by term, then chunk.
--
-- A reader looks a term up under both keys and keeps the postings of the
-- bucket row that name it. Which terms a segment buckets, and how, is the
-- writer's choice (store/postgres/postings.go); readers rely only on the
-- layout above, so rows written before this version stay valid as they
-- are and are rewritten in the new layout when their segments merge.
--
-- The downgrade expands bucket rows into term rows.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION cordon.tenant_upgrade_10(s text) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    -- Two statements: Citus refuses ADD CONSTRAINT with other subcommands
    -- on a distributed table (a tenant on a worker migrated down and up).
    EXECUTE format('ALTER TABLE %I.postings ADD COLUMN terms text[] COLLATE "C"', s);
    EXECUTE format($ddl$
        ALTER TABLE %I.postings
            ADD CONSTRAINT postings_terms_check CHECK (terms IS NULL OR cardinality(terms) = n)$ddl$, s);
    BEGIN
        EXECUTE format('ALTER TABLE %I.postings ALTER COLUMN terms SET COMPRESSION lz4', s);
    EXCEPTION WHEN feature_not_supported THEN
        RAISE NOTICE 'lz4 is not available on this server: % keeps pglz compression', s;
    END;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 10 $fn$;
-- +goose StatementEnd

SELECT cordon.apply_tenant_upgrades(name) FROM cordon.tenants ORDER BY name;

-- +goose Down
-- +goose StatementBegin
DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT schema_name FROM cordon.tenants WHERE schema_version >= 10 LOOP
        EXECUTE format($ddl$
            INSERT INTO %1$I.postings (term, block, n, chunks, tfs)
            SELECT u.term, p.block, count(*), array_agg(u.chunk ORDER BY u.chunk), array_agg(u.tf ORDER BY u.chunk)
            FROM %1$I.postings p CROSS JOIN LATERAL unnest(p.chunks, p.tfs, p.terms) AS u(chunk, tf, term)
            WHERE p.terms IS NOT NULL
            GROUP BY u.term, p.block$ddl$, r.schema_name);
        EXECUTE format('DELETE FROM %I.postings WHERE terms IS NOT NULL', r.schema_name);
        EXECUTE format('ALTER TABLE %I.postings DROP COLUMN terms', r.schema_name);
    END LOOP;
    UPDATE cordon.tenants SET schema_version = 9 WHERE schema_version >= 10;
END
$do$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 9 $fn$;
-- +goose StatementEnd

DROP FUNCTION cordon.tenant_upgrade_10(text);
