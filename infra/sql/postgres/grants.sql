-- infra/sql/postgres/grants.sql — the least privilege sluice needs on PostgreSQL (>= 14).
-- Run as the owner of the captured tables (or a superuser / rds_superuser), in the
-- source database. Replace sluice / app_db / public.orders / sluice_orders with yours.
-- Tested: tests/postgres/security.rs `least_privilege_user_drains` runs a full drain
-- (insert, update, delete) as exactly this role on the local stack.

-- 1. A login role with the REPLICATION attribute: the logical-slot functions
--    (pg_create_logical_replication_slot, pg_logical_slot_peek_binary_changes,
--    pg_replication_slot_advance) require it. No superuser, no pg_hba.conf
--    `replication` line: sluice reads the slot over an ordinary connection.
--    On RDS / Aurora use `GRANT rds_replication TO sluice;` instead of the attribute.
CREATE ROLE sluice WITH LOGIN REPLICATION PASSWORD 'change-me';

-- 2. Reach the database and schema (PUBLIC usually has both already).
GRANT CONNECT ON DATABASE app_db TO sluice;
GRANT USAGE ON SCHEMA public TO sluice;

-- 3. SELECT on every captured table (catalog lookups and baselines read them).
GRANT SELECT ON public.orders TO sluice;

-- 3b. Only for a captured table WITHOUT a primary key (REPLICA IDENTITY FULL) that is
--     baselined: its baseline pins an exact snapshot with LOCK TABLE ... IN SHARE MODE
--     (held for milliseconds; sluice never writes), which PostgreSQL allows only with
--     UPDATE, DELETE or TRUNCATE on the table (PostgreSQL >= 17: MAINTAIN). Without it
--     that baseline fails with SLUICE_SOURCE_PREREQUISITE naming this grant — tested by
--     tests/postgres/keyless.rs `keyless_pg_baseline_names_the_grant_its_lock_needs`.
-- GRANT UPDATE ON public.logs TO sluice;

-- 4. The publication, created by the tables' owner, listing the captured tables and
--    publishing insert, update, delete and truncate (the default). With it in place,
--    sluice never needs ownership of the tables. Set `source.postgres.publication` to
--    its name; `create: true` then only creates the slot.
CREATE PUBLICATION sluice_orders FOR TABLE public.orders;

-- Without step 1 a drain fails with SLUICE_SOURCE_PREREQUISITE
-- ("must be superuser or replication role to use replication slots", hint naming
-- ALTER ROLE ... WITH REPLICATION) — tested by
-- `missing_replication_attribute_is_a_prerequisite_error_naming_it`.
