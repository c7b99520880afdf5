#!/bin/sh
# Runs once, when the PostgreSQL container creates its data directory (docker-entrypoint-initdb.d).
# Two roles (issue 26):
#   fairtone_owner  owns the database and every table; migrations run as it (compose's "migrate" service).
#   fairtone_app    what the web, worker and beat processes connect as: read and write the rows, nothing else.
#                   It owns nothing, so it cannot ALTER, DROP or TRUNCATE a table nor disable the audit log's
#                   triggers; migration 0019 also takes UPDATE and DELETE on the audit table from it.
# Passwords from the environment (docker-compose.yml passes them from .env).
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v owner_pw="$FAIRTONE_DB_OWNER_PASSWORD" -v app_pw="$FAIRTONE_DB_APP_PASSWORD" -v db="$POSTGRES_DB" <<'SQL'
CREATE ROLE fairtone_owner LOGIN PASSWORD :'owner_pw';
CREATE ROLE fairtone_app LOGIN PASSWORD :'app_pw';
ALTER DATABASE :"db" OWNER TO fairtone_owner;
ALTER SCHEMA public OWNER TO fairtone_owner;
REVOKE ALL ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO fairtone_app;
-- Every table and sequence the owner's migrations create: rows to the app, nothing more.
ALTER DEFAULT PRIVILEGES FOR ROLE fairtone_owner IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO fairtone_app;
ALTER DEFAULT PRIVILEGES FOR ROLE fairtone_owner IN SCHEMA public
    GRANT USAGE, SELECT ON SEQUENCES TO fairtone_app;
SQL
