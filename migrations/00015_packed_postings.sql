-- Tenant schema version 12: packed postings.
--
-- A postings row held its postings as the arrays chunks (int8[]), tfs
-- (int4[]) and, in a bucket row, terms (text[]). PostgreSQL sends an array
-- element by element through each element's output function, so reading
-- the postings of a query's common terms cost more than the rest of a
-- query ranked in SQL. From version 12 a row is written with its postings
-- packed in one bytea instead:
--
--   postings (term, block, n, chunks, tfs, terms, data)
--
--   - data is the row's postings as varints (store/postgres/packed.go and
--     docs/architecture.md, "Lexical side", give the layout byte for byte),
--     about a third of the arrays' stored (compressed) size;
--   - a row holds either data (chunks, tfs and terms NULL) or the arrays
--     (data NULL): rows written before this version keep their arrays
--     until a merge or a collection rewrites them, and readers take both.
--
-- cordon.unpack_postings(data) gives a packed row's arrays back in SQL, for
-- inspection and for the downgrade, which unpacks every packed row.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION cordon.unpack_postings(data bytea, OUT chunks bigint[], OUT tfs integer[], OUT terms text[])
LANGUAGE plpgsql IMMUTABLE STRICT AS $fn$
DECLARE
    -- A copy in memory: get_byte on a value still in TOAST would fetch it
    -- whole at every call.
    buf bytea := data || ''::bytea;
    pos integer := 1;  -- offset of the next byte, from 0
    b integer;
    v bigint;
    shift integer;
    n integer;
    prev bigint := 0;
    runs integer;
    len integer;
    term text;
BEGIN
    IF length(buf) = 0 OR get_byte(buf, 0) <> 1 THEN
        RAISE EXCEPTION 'malformed packed postings: no format byte 1';
    END IF;
    -- Each uvarint: 7 bits a byte, least significant first, the high bit
    -- set on every byte but the last.
    v := 0; shift := 0;
    LOOP
        b := get_byte(buf, pos); pos := pos + 1;
        v := v | ((b & 127)::bigint << shift); shift := shift + 7;
        EXIT WHEN b < 128;
    END LOOP;
    n := v;
    chunks := '{}';
    tfs := '{}';
    FOR i IN 1 .. n LOOP
        v := 0; shift := 0;
        LOOP
            b := get_byte(buf, pos); pos := pos + 1;
            v := v | ((b & 127)::bigint << shift); shift := shift + 7;
            EXIT WHEN b < 128;
        END LOOP;
        -- Zigzag: an even v is v/2, an odd one -(v+1)/2.
        prev := prev + CASE WHEN v & 1 = 0 THEN v >> 1 ELSE -((v >> 1) + 1) END;
        chunks := chunks || prev;
    END LOOP;
    FOR i IN 1 .. n LOOP
        v := 0; shift := 0;
        LOOP
            b := get_byte(buf, pos); pos := pos + 1;
            v := v | ((b & 127)::bigint << shift); shift := shift + 7;
            EXIT WHEN b < 128;
        END LOOP;
        tfs := tfs || v::integer;
    END LOOP;
    v := 0; shift := 0;
    LOOP
        b := get_byte(buf, pos); pos := pos + 1;
        v := v | ((b & 127)::bigint << shift); shift := shift + 7;
        EXIT WHEN b < 128;
    END LOOP;
    runs := v;
    IF runs > 0 THEN
        terms := '{}';
    END IF;
    FOR r IN 1 .. runs LOOP
        v := 0; shift := 0;
        LOOP
            b := get_byte(buf, pos); pos := pos + 1;
            v := v | ((b & 127)::bigint << shift); shift := shift + 7;
            EXIT WHEN b < 128;
        END LOOP;
        len := v;
        term := convert_from(substring(buf FROM pos + 1 FOR len), 'UTF8');
        pos := pos + len;
        v := 0; shift := 0;
        LOOP
            b := get_byte(buf, pos); pos := pos + 1;
            v := v | ((b & 127)::bigint << shift); shift := shift + 7;
            EXIT WHEN b < 128;
        END LOOP;
        terms := terms || array_fill(term, ARRAY[v::integer]);
    END LOOP;
    IF pos <> length(buf) OR (runs > 0 AND cardinality(terms) <> n) THEN
        RAISE EXCEPTION 'malformed packed postings';
    END IF;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION cordon.tenant_upgrade_12(s text) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    -- One subcommand a statement, as Citus wants on distributed tables.
    EXECUTE format('ALTER TABLE %I.postings ADD COLUMN data bytea', s);
    EXECUTE format('ALTER TABLE %I.postings ALTER COLUMN chunks DROP NOT NULL', s);
    EXECUTE format('ALTER TABLE %I.postings ALTER COLUMN tfs DROP NOT NULL', s);
    EXECUTE format($ddl$
        ALTER TABLE %I.postings ADD CONSTRAINT postings_data_check CHECK (
            CASE WHEN data IS NULL THEN chunks IS NOT NULL AND tfs IS NOT NULL
                 ELSE chunks IS NULL AND tfs IS NULL AND terms IS NULL AND length(data) >= 4 END)$ddl$, s);
    -- Packed postings hardly compress: store them as they are.
    BEGIN
        EXECUTE format('ALTER TABLE %I.postings ALTER COLUMN data SET STORAGE EXTERNAL', s);
    EXCEPTION WHEN feature_not_supported THEN
        RAISE NOTICE 'column storage cannot be set here: % keeps compressed packed postings', s;
    END;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 12 $fn$;
-- +goose StatementEnd

SELECT cordon.apply_tenant_upgrades(name) FROM cordon.tenants ORDER BY name;

-- +goose Down
-- +goose StatementBegin
DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT schema_name FROM cordon.tenants WHERE schema_version >= 12 LOOP
        EXECUTE format($ddl$
            UPDATE %I.postings p SET (chunks, tfs, terms, data) =
                (SELECT u.chunks, u.tfs, u.terms, NULL::bytea FROM cordon.unpack_postings(p.data) u)
            WHERE p.data IS NOT NULL$ddl$, r.schema_name);
        EXECUTE format('ALTER TABLE %I.postings DROP CONSTRAINT postings_data_check', r.schema_name);
        EXECUTE format('ALTER TABLE %I.postings DROP COLUMN data', r.schema_name);
        EXECUTE format('ALTER TABLE %I.postings ALTER COLUMN chunks SET NOT NULL', r.schema_name);
        EXECUTE format('ALTER TABLE %I.postings ALTER COLUMN tfs SET NOT NULL', r.schema_name);
    END LOOP;
    UPDATE cordon.tenants SET schema_version = 11 WHERE schema_version >= 12;
END
$do$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.tenant_latest_version() RETURNS integer
LANGUAGE sql STABLE AS $fn$ SELECT 11 $fn$;
-- +goose StatementEnd

DROP FUNCTION cordon.tenant_upgrade_12(text);
DROP FUNCTION cordon.unpack_postings(bytea);
