-- Included by roles.sql: the user running it (the master) acts as :member, by SET ROLE and as
-- its owner (giving its tables away, or taking them). PostgreSQL 16 grants a role's creator
-- ADMIN without INHERIT or SET, so there the grant names both and both are checked; before 16
-- membership is both.
\if :pg16
SELECT format('GRANT %I TO CURRENT_USER WITH INHERIT TRUE, SET TRUE', :'member')
WHERE NOT (pg_has_role(current_user, :'member', 'SET')
           AND pg_has_role(current_user, :'member', 'USAGE')) \gexec
\else
SELECT format('GRANT %I TO CURRENT_USER', :'member')
WHERE NOT pg_has_role(current_user, :'member', 'MEMBER') \gexec
\endif
