-- Tenants on Citus workers (schema-based sharding).
--
-- On a Citus coordinator with worker nodes, each tenant schema becomes a
-- distributed schema: Citus places all its tables together on one worker
-- and routes every statement that touches only that schema (and reference
-- tables) to that worker. Without Citus, or on a coordinator without
-- workers, nothing here changes what a migration or create_tenant does.
--
-- What lives where on a cluster:
--   - cordon.tenants is a reference table (a copy on every node). Cordon's
--     queries join it with a tenant's tables (a query reads its tenant's
--     settings and stats in one statement; an audit insert checks the
--     tenant is registered), and a join of a reference table with one
--     distributed schema's tables runs whole on that schema's worker. As a
--     coordinator-local table it would be planned apart from the tenant's
--     tables: each such statement would take extra round trips, and some
--     (the audit insert) cannot be planned at all. Writes to it (tenant
--     create, drop, set) commit on every node with two-phase commit; they
--     are rare.
--   - cordon.service_roles and public.goose_db_version stay plain tables
--     on the coordinator: only the coordinator's migrations and functions
--     read them, never in a statement with tenant tables.
--
-- Citus distributes only tables created by top-level statements, so a
-- tenant's tables, which cordon.create_tenant creates inside functions,
-- are first created as a regular schema on the coordinator (with
-- citus.enable_schema_based_sharding off for the transaction, whatever the
-- database sets) and then distributed with citus_schema_distribute in the
-- same transaction: the tenant appears on its worker whole, or not at all.
-- The audit table's append-only trigger only raises an error, so it is
-- safe to run on a shard: citus.enable_unsafe_triggers is set for the
-- transaction that distributes, as Citus requires for tables with
-- triggers. Later migrations upgrade tenant schemas with ALTER TABLE,
-- CREATE INDEX and the like inside functions, which Citus propagates to
-- the worker holding each tenant; a later upgrade that creates a table in
-- a tenant schema must distribute it itself.

-- +goose Up
-- The number of Citus worker nodes that take shards, when this database
-- has Citus and this node is its coordinator; else 0.
-- +goose StatementBegin
CREATE FUNCTION cordon.citus_workers() RETURNS integer
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    coordinator boolean;
    n integer;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
        RETURN 0;
    END IF;
    EXECUTE 'SELECT citus_is_coordinator()' INTO coordinator;
    IF NOT coordinator THEN
        RETURN 0;
    END IF;
    EXECUTE $q$SELECT count(*) FROM pg_dist_node
               WHERE groupid <> 0 AND noderole = 'primary' AND isactive AND shouldhaveshards$q$ INTO n;
    RETURN n;
END
$fn$;
-- +goose StatementEnd

-- Makes cordon.tenants a reference table, once, on a coordinator with
-- workers.
-- +goose StatementBegin
CREATE FUNCTION cordon.citus_distribute_registry() RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    done boolean;
BEGIN
    IF cordon.citus_workers() = 0 THEN
        RETURN;
    END IF;
    EXECUTE $q$SELECT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'cordon.tenants'::regclass)$q$ INTO done;
    IF done THEN
        RETURN;
    END IF;
    PERFORM create_reference_table('cordon.tenants');
    -- The coordinator's original rows are no longer read; drop them.
    PERFORM truncate_local_data_after_distributing_table('cordon.tenants');
END
$fn$;
-- +goose StatementEnd

-- Distributes tenant p_name's schema: Citus moves its tables to a worker.
-- It returns false when the schema was distributed already, and fails
-- (CD003) where there are no Citus workers.
-- +goose StatementBegin
CREATE FUNCTION cordon.distribute_tenant(p_name text) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    s text;
    done boolean;
    triggers text;
BEGIN
    IF cordon.citus_workers() = 0 THEN
        RAISE EXCEPTION 'cannot distribute tenant %: this database is not a Citus coordinator with worker nodes', p_name
            USING ERRCODE = 'CD003';
    END IF;
    PERFORM cordon.citus_distribute_registry();
    SELECT schema_name INTO s FROM cordon.tenants WHERE name = p_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'tenant % is not registered', p_name USING ERRCODE = 'CD004';
    END IF;
    EXECUTE 'SELECT EXISTS (SELECT FROM pg_dist_schema WHERE schemaid = $1::regnamespace)' INTO done USING s;
    IF done THEN
        RETURN false;
    END IF;
    triggers := current_setting('citus.enable_unsafe_triggers');
    PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
    PERFORM citus_schema_distribute(s::regnamespace);
    PERFORM set_config('citus.enable_unsafe_triggers', triggers, true);
    RETURN true;
END
$fn$;
-- +goose StatementEnd

-- create_tenant as in migration 10; on a Citus coordinator with workers
-- the new schema is created regular and then distributed.
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
    INSERT INTO cordon.tenants (name, schema_name, embed_model, dims, k1, b, max_words, overlap_words, tokenizer_version, bm25_statistics)
    VALUES (p_name, 'cordon_t_' || p_name, p_embed_model, p_dims, p_k1, p_b, p_max_words, p_overlap_words, p_tokenizer_version, p_bm25_statistics);
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

SELECT cordon.citus_distribute_registry();

-- +goose Down
-- The registry and the tenants stay distributed: Citus cannot move a
-- tenant back to the coordinator (citus_schema_undistribute refuses tables
-- with identity columns, as chunks.id is). Downgrades of later tenant
-- schema versions still reach every worker; that of version 5 (migration
-- 00006) renames constraints, which Citus refuses on distributed tables,
-- so a cluster migrates down to 00006 at most.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cordon.create_tenant(
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

DROP FUNCTION cordon.distribute_tenant(text);
DROP FUNCTION cordon.citus_distribute_registry();
DROP FUNCTION cordon.citus_workers();
