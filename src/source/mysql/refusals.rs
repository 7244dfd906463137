//! The two refusals of a binlog that cannot continue the job's checkpoint, each with the
//! operator's recovery steps: the changes after it are gone (`SLUICE_SOURCE_LOG_GAP`), or
//! the binlog is not the one it was taken in (`SLUICE_SOURCE_FOREIGN_CHECKPOINT`). Every
//! check of the engine that refuses a checkpoint refuses through these two.

use crate::error::{Code, Error};

/// `SLUICE_SOURCE_LOG_GAP` with the re-baseline steps.
pub fn log_gap(message: String) -> Error {
    Error::new(Code::SourceLogGap, message).hint(
        "the changes after the checkpoint are gone from the binlog: re-baseline the table(s) — clear the job's state \
         with `sluice state clear --config FILE` and run a new baseline; then keep binlogs longer than the schedule interval \
         (binlog_expire_logs_seconds / expire_logs_days; RDS: CALL mysql.rds_set_configuration('binlog retention hours', 24))",
    )
}

/// `SLUICE_SOURCE_FOREIGN_CHECKPOINT` with the recovery steps.
pub fn foreign(message: String) -> Error {
    Error::new(Code::SourceForeignCheckpoint, message).hint(
        "the checkpoint does not belong to this server's binlog: point source.url at the original server, or — if the \
         binlog was reset or the server replaced — clear the job's state with `sluice state clear --config FILE` and re-baseline",
    )
}
