-- Included by roles.sql: the login :login, created with :password when missing (refused
-- without one), its password changed only when one is passed, and made a member of :group
-- when one is named.
SELECT format('DO $refuse$ BEGIN RAISE EXCEPTION %L; END $refuse$',
              format('roles.sql: the login %s does not exist yet: pass its password to create it', :'login'))
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'login') AND :'password' = '' \gexec
SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', :'login', :'password')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'login') \gexec
SELECT format('ALTER ROLE %I LOGIN PASSWORD %L', :'login', :'password')
WHERE :'password' <> '' \gexec
SELECT :'group' <> '' AS in_group \gset
\if :in_group
SELECT format('GRANT %I TO %I', :'group', :'login')
WHERE NOT pg_has_role(:'login', :'group', 'MEMBER') \gexec
\endif
