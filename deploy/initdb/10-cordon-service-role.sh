#!/bin/sh
# Creates the role the service connects as, when the PostgreSQL container
# initializes an empty data directory (the image runs
# /docker-entrypoint-initdb.d/* once, as the superuser). The role owns
# nothing; 'cordon migrate --service-role' grants it what serving needs.
# An existing data directory is not initialized again: create the role by
# hand there (docs/running.md, "Deploying into an existing PostgreSQL").
set -eu
: "${CORDON_SERVICE_PASSWORD:?set CORDON_SERVICE_PASSWORD}"
psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
	--set=role="${CORDON_SERVICE_ROLE:-cordon_service}" --set=password="$CORDON_SERVICE_PASSWORD" <<'SQL'
CREATE ROLE :"role" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'password';
SQL
