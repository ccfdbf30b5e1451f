-- The logins the functions use in production: roles of their own, not the RDS master user
-- (docs/deploy.md, step 4). Run with psql as the master user (RDS: LOGIN CREATEROLE CREATEDB,
-- no superuser), connected to the database. First deploy, with new passwords:
--
--   psql -v ON_ERROR_STOP=1 -v app_role=triage -v app_password="$APP_PASSWORD" \
--        -v api_login=triage_api_login -v api_password="$API_PASSWORD" \
--        -v deliver_login=triage_deliver_login -v deliver_password="$DELIVER_PASSWORD" \
--        -f docs/sql/roles.sql "host=localhost port=15432 dbname=triage user=triage_admin sslmode=require"
--
-- Again for a new release (docs/deploy.md, step 15), with no password: a password is set only
-- when one is passed, so the stored secrets keep working.
--
--   psql -v ON_ERROR_STOP=1 -v app_role=triage -v api_login=triage_api_login \
--        -v deliver_login=triage_deliver_login -f docs/sql/roles.sql "host=… user=triage_admin …"
--
-- A login that does not exist yet needs its password; an empty password counts as none.
-- PostgreSQL 16 and 17 (what RDS offers; 15 still works). Tested, from the commands in
-- docs/deploy.md, by shared/tests/pipeline/roles.rs on a cluster shaped like RDS.
\set ON_ERROR_STOP on

-- Passwords not passed are empty: nothing is set from them.
\if :{?app_password} \else \set app_password '' \endif
\if :{?api_password} \else \set api_password '' \endif
\if :{?deliver_password} \else \set deliver_password '' \endif
SELECT current_setting('server_version_num')::int >= 160000 AS pg16 \gset

-- 1. The application role: created with its password when missing (refused without one), its
-- password changed only when one is passed (login.sql). It logs in and nothing more: a role made
-- by CREATE ROLE has no superuser, CREATEDB or CREATEROLE, and nothing here gives them (RDS's
-- master may not).
\set login :app_role
\set password :app_password
\set group ''
\ir login.sql

-- 2. Connect, and create tables in `public`: since PostgreSQL 15 only the database owner may
--    create there, so the migrations (run by the stack as this role) need CREATE granted.
SELECT format('GRANT CONNECT, TEMPORARY ON DATABASE %I TO %I', current_database(), :'app_role') \gexec
GRANT USAGE, CREATE ON SCHEMA public TO :"app_role";

-- 3. The master may act as the roles it manages: giving a table away and SET ROLE need it.
--    Since PostgreSQL 16 the creator of a role holds it with ADMIN but without INHERIT or SET
--    (RDS's master too), so membership is granted WITH both, and checked as 'SET' and 'USAGE',
--    not 'MEMBER'.
\set member :app_role
\ir member.sql

--    Tables made before this role took over (a first deploy with the master secret) go to it,
--    so later migrations can alter them. Sequences follow their tables.
SELECT format('ALTER TABLE public.%I OWNER TO %I', tablename, :'app_role')
FROM pg_tables WHERE schemaname = 'public' AND tableowner <> :'app_role'
  AND tablename <> 'operation_audit' \gexec

-- 4. Group roles (NOLOGIN; roles belong to the cluster) for the processes that face the outside,
--    each with its login when named: `triage_api` (docs/runbook.md "Security": read and insert
--    tickets, nothing more) and `triage_deliver` (the deliverer, which calls customers' URLs:
--    it reads what a delivery needs and changes only deliveries). What each may do is granted
--    by the migrations, in one place each (`grant_api_role()`, V8 and later;
--    `grant_deliver_role()`, V21), called again below, as the tables' owner, for tables that
--    already exist.
SELECT 'CREATE ROLE triage_api NOLOGIN'
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'triage_api') \gexec
SELECT 'CREATE ROLE triage_deliver NOLOGIN'
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'triage_deliver') \gexec
SELECT format('GRANT CONNECT ON DATABASE %I TO triage_api, triage_deliver', current_database()) \gexec
GRANT USAGE ON SCHEMA public TO triage_api, triage_deliver;
\if :{?api_login}
\set login :api_login
\set password :api_password
\set group triage_api
\ir login.sql
\endif
\if :{?deliver_login}
\set login :deliver_login
\set password :deliver_password
\set group triage_deliver
\ir login.sql
\endif

-- 5. The audit trail (operation_audit) belongs to `triage_audit` (NOLOGIN), with its trigger's
--    function: the logins may insert rows and close a started one (the columns that finish it),
--    and no login may disable the trigger, replace its function or rewrite the trail.
SELECT 'CREATE ROLE triage_audit NOLOGIN'
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'triage_audit') \gexec
-- An owner needs CREATE on its objects' schema; nobody logs in as this one.
GRANT USAGE, CREATE ON SCHEMA public TO triage_audit;
\set member triage_audit
\ir member.sql
SELECT to_regclass('public.operation_audit') IS NOT NULL AS has_audit \gset
\if :has_audit
ALTER TABLE public.operation_audit OWNER TO triage_audit;
ALTER FUNCTION public.operation_audit_append_only() OWNER TO triage_audit;
SET ROLE triage_audit;
REVOKE ALL ON public.operation_audit FROM PUBLIC;
SELECT format('GRANT SELECT, INSERT ON public.operation_audit TO %I', :'app_role') \gexec
SELECT format('GRANT UPDATE (status, result, error) ON public.operation_audit TO %I', :'app_role') \gexec
SELECT format('GRANT USAGE ON SEQUENCE %s TO %I',
              pg_get_serial_sequence('public.operation_audit', 'id'), :'app_role')
WHERE pg_get_serial_sequence('public.operation_audit', 'id') IS NOT NULL \gexec
RESET ROLE;
\endif

-- 6. The group roles' grants, as the tables' owner.
SET ROLE :"app_role";
SELECT 'SELECT grant_api_role()' WHERE to_regproc('public.grant_api_role') IS NOT NULL \gexec
SELECT 'SELECT grant_deliver_role()' WHERE to_regproc('public.grant_deliver_role') IS NOT NULL \gexec
RESET ROLE;

-- 7. With RDS Proxy, the session settings on the role let it multiplex (docs/deploy.md, RDS
--    Proxy; what the pool otherwise sets on each session):
-- ALTER ROLE triage SET statement_timeout = '10s';
-- ALTER ROLE triage SET lock_timeout = '10s';
-- ALTER ROLE triage SET plan_cache_mode = force_custom_plan;
