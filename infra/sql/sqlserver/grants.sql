-- infra/sql/sqlserver/grants.sql — the least privilege sluice needs on SQL Server CDC.
-- Run as a db_owner (CDC enablement needs sysadmin for the database step). Replace
-- app_db / sluice / dbo.orders with yours.
-- NOT YET TESTED: there is no SQL Server source in sluice yet.

USE app_db;
-- CDC on the database and each captured table (administrator, once). The gating role
-- restricts who may read the change table; sluice's user is its only member.
EXEC sys.sp_cdc_enable_db;
CREATE ROLE sluice_cdc_reader;
EXEC sys.sp_cdc_enable_table
    @source_schema = N'dbo',
    @source_name = N'orders',
    @role_name = N'sluice_cdc_reader',
    @supports_net_changes = 0;

-- The login and user.
CREATE LOGIN sluice WITH PASSWORD = 'change-me-Str0ng!';
CREATE USER sluice FOR LOGIN sluice;

-- Membership in the gating role, and SELECT on the cdc schema (change tables and the
-- fn_cdc_get_all_changes_* / sys.fn_cdc_get_min_lsn / get_max_lsn functions).
ALTER ROLE sluice_cdc_reader ADD MEMBER sluice;
GRANT SELECT ON SCHEMA::cdc TO sluice;

-- SELECT on the captured tables (metadata and baselines).
GRANT SELECT ON dbo.orders TO sluice;
