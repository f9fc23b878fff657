-- Tenant schema version 9: postings found by term through a plain index.
--
-- Every write adds one postings row per distinct term of its batch (about 25
-- rows per chunk written in batches of 50 documents), and merges rewrite
-- them, so index maintenance on postings is much of a write's work in the
-- server. The primary key (term, block) was a unique B-tree on a text key
-- and an integer: each insert descends it with text comparisons and checks
-- uniqueness, and with every term in every segment its entries never share
-- a key (profiled: B-tree code was about 30% of the server's CPU during a
-- bulk ingest). Readers only look postings up by term equality (a query's
-- terms) and merges by block, so from version 9:
--
--   - a non-unique B-tree on term serves the lookups by term; its entries
--     of one term are deduplicated into posting lists, so it is a quarter
--     of the primary key's size and inserts touch fewer pages;
--   - the B-tree on block serves merges, as before;
--   - (term, block) is no longer enforced unique: writers and merges write
--     one row per term per block by construction.
--
-- Measured on 1M small-segment rows: 2.9 s of server CPU to insert them
-- with the version 8 indexes, 2.1-2.4 s with these. A hash index on term
-- measured 1.8 s there, but in a bulk ingest the entries of common terms
-- (one per segment, and dead ones until vacuum) pile into overflow pages
-- that every insert walks, and it was no faster than the B-tree.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION cordon.tenant_upgrade_9(s text) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    EXECUTE format('ALTER TABLE %I.postings DROP CONSTRAINT postings_pkey', s);
    EXECUTE format('CREATE INDEX postings_term_idx ON %I.postings (term)', s);
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 9 $fn$;
-- +goose StatementEnd

SELECT cordon.apply_tenant_upgrades(name) FROM cordon.tenants ORDER BY name;

-- +goose Down
-- +goose StatementBegin
DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT schema_name FROM cordon.tenants WHERE schema_version >= 9 LOOP
        EXECUTE format('DROP INDEX %I.postings_term_idx', r.schema_name);
        EXECUTE format('ALTER TABLE %I.postings ADD CONSTRAINT postings_pkey PRIMARY KEY (term, block)', r.schema_name);
    END LOOP;
    UPDATE cordon.tenants SET schema_version = 8 WHERE schema_version >= 9;
END
$do$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 8 $fn$;
-- +goose StatementEnd

DROP FUNCTION cordon.tenant_upgrade_9(text);
