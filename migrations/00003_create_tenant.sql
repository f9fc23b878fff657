-- cordon.create_tenant registers a tenant with its index settings and creates
-- its schema at the latest version, idempotently: creating an existing tenant
-- with the same settings is a no-op, with other settings an error.
-- cordon.drop_tenant removes the schema and the registry row.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION cordon.create_tenant(
    p_name text, p_dims integer, p_k1 double precision, p_b double precision,
    p_max_words integer, p_overlap_words integer, p_tokenizer_version text
) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    t cordon.tenants;
BEGIN
    -- Serialise concurrent creates of the same tenant.
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

-- +goose StatementBegin
CREATE FUNCTION cordon.drop_tenant(p_name text) RETURNS boolean
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

-- +goose Down
DROP FUNCTION cordon.drop_tenant(text);
DROP FUNCTION cordon.create_tenant(text, integer, double precision, double precision, integer, integer, text);
