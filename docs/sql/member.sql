-- Included by roles.sql: the user running it (the master) may SET ROLE to :member, which
-- giving a table to :member needs too. PostgreSQL 16 grants a role's creator ADMIN without
-- SET, so there the grant says WITH SET TRUE (INHERIT FALSE: the master acts as the role only
-- by SET ROLE) and 'SET' is what is checked; before 16 membership is SET.
\if :pg16
SELECT format('GRANT %I TO CURRENT_USER WITH INHERIT FALSE, SET TRUE', :'member')
WHERE NOT pg_has_role(current_user, :'member', 'SET') \gexec
\else
SELECT format('GRANT %I TO CURRENT_USER', :'member')
WHERE NOT pg_has_role(current_user, :'member', 'MEMBER') \gexec
\endif
