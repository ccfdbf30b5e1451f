-- The login the functions use in production: a role of its own, not the RDS master user
-- (docs/deploy.md, step 4). Run with psql as the master user, connected to the database:
--
--   psql -v ON_ERROR_STOP=1 -v app_role=triage -v app_password="$APP_PASSWORD" \
--        -v api_login=triage_api_login -v api_password="$API_PASSWORD" \
--        -f docs/sql/roles.sql "host=localhost port=15432 dbname=triage user=triage_admin sslmode=require"
--
-- `api_login` (optional, with `api_password`) is the API's own login (template parameter
-- ApiDbSecretArn, step 4 below): it may read and insert tickets, and nothing more.
-- Safe to run again: it creates what is missing and sets the password again (run it with the
-- new password before storing that in the secret, or let rotation change it afterwards).
-- Tested by shared/tests/pipeline/migrate.rs (the app migrates and runs as this role; the API
-- runs as the API login and may not delete or change the schema).
\set ON_ERROR_STOP on

-- 1. The role: it logs in and nothing more (no superuser, no CREATEDB, no CREATEROLE).
SELECT format('CREATE ROLE %I LOGIN', :'app_role')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'app_role') \gexec
SELECT format('ALTER ROLE %I LOGIN PASSWORD %L', :'app_role', :'app_password') \gexec

-- 2. Connect, and create tables in `public`: since PostgreSQL 15 only the database owner may
--    create there, so the migrations (run by the stack as this role) need CREATE granted.
SELECT format('GRANT CONNECT, TEMPORARY ON DATABASE %I TO %I', current_database(), :'app_role') \gexec
GRANT USAGE, CREATE ON SCHEMA public TO :"app_role";

-- 3. Tables made before this role took over (a first deploy with the master secret) go to
--    it, so later migrations can alter them. Giving a table away needs membership in the new
--    owner (RDS: the master user is no superuser). Sequences follow their tables.
SELECT format('GRANT %I TO CURRENT_USER', :'app_role')
WHERE EXISTS (SELECT FROM pg_tables WHERE schemaname = 'public' AND tableowner <> :'app_role') \gexec
SELECT format('ALTER TABLE public.%I OWNER TO %I', tablename, :'app_role')
FROM pg_tables WHERE schemaname = 'public' AND tableowner <> :'app_role' \gexec

-- 4. The API's least privilege (docs/runbook.md "Security"): the group role triage_api
--    (NOLOGIN; roles belong to the cluster) and, when api_login is given, a login in it. What
--    triage_api may do is granted by the migrations, in one place (`grant_api_role()`,
--    migrations/V8__security.sql, replaced by every later migration that gives the API a
--    table); it is called again here, as the tables' owner, for tables that already exist.
SELECT 'CREATE ROLE triage_api NOLOGIN'
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'triage_api') \gexec
SELECT format('GRANT CONNECT ON DATABASE %I TO triage_api', current_database()) \gexec
GRANT USAGE ON SCHEMA public TO triage_api;
\if :{?api_login}
SELECT format('CREATE ROLE %I LOGIN', :'api_login')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'api_login') \gexec
SELECT format('ALTER ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD %L',
              :'api_login', :'api_password') \gexec
SELECT format('GRANT triage_api TO %I', :'api_login')
WHERE NOT pg_has_role(:'api_login', 'triage_api', 'MEMBER') \gexec
\endif
SELECT format('GRANT %I TO CURRENT_USER', :'app_role')
WHERE NOT pg_has_role(current_user, :'app_role', 'MEMBER') \gexec
SET ROLE :"app_role";
SELECT 'SELECT grant_api_role()' WHERE to_regproc('public.grant_api_role') IS NOT NULL \gexec
RESET ROLE;

-- 5. With RDS Proxy, timeouts on the role let it multiplex (docs/deploy.md, RDS Proxy):
-- ALTER ROLE triage SET statement_timeout = '10s';
-- ALTER ROLE triage SET lock_timeout = '10s';
