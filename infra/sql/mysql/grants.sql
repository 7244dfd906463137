-- infra/sql/mysql/grants.sql — the least privilege sluice needs on MySQL 8 / MariaDB 10.11.
-- Run as an administrator. Replace sluice / app_db with yours.
-- Tested on MariaDB 10.11: tests/mysql/security.rs drains over TLS as such a user with
-- REQUIRE SSL, and the tests/mysql/ suites and the MariaDB half of tests/conformance/source/
-- drain as such a user (tests/support/mod.rs, TestMysqlDb).
-- The server needs binlog_format = ROW, binlog_row_image = FULL (and on MySQL
-- binlog_row_metadata = FULL).

CREATE USER 'sluice'@'%' IDENTIFIED BY 'change-me';
-- Recommended: refuse plain-text logins for this user (sluice uses TLS for every
-- non-loopback host anyway, see source.tls):
-- ALTER USER 'sluice'@'%' REQUIRE SSL;

-- Reading the binlog as a replica, and SHOW MASTER/BINARY LOG STATUS, SHOW BINARY LOGS.
GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'sluice'@'%';

-- MariaDB >= 10.5.2 only: SHOW BINLOG STATUS / SHOW BINARY LOGS moved to BINLOG MONITOR.
-- (Remove this line on MySQL, where the privilege does not exist.)
GRANT BINLOG MONITOR ON *.* TO 'sluice'@'%';

-- MySQL with gtid_mode = ON, optional: a new stream's anchor reads the GTID set with its
-- binlog position (performance_schema.log_status), so its first checkpoints can follow a
-- failover; without it the set is learnt at the next binlog rotation (docs/mysql.md).
-- GRANT BACKUP_ADMIN ON *.* TO 'sluice'@'%';

-- Table metadata and baselines.
GRANT SELECT ON app_db.* TO 'sluice'@'%';
-- Or per table: GRANT SELECT ON app_db.orders TO 'sluice'@'%';

-- On Amazon RDS: also keep binlogs long enough for the schedule, e.g.
-- CALL mysql.rds_set_configuration('binlog retention hours', 24);
