//! Typed log positions, one type per engine, behind one enum.
//!
//! Guarantees: every position has a text form that round-trips exactly (`Display` ↔
//! `FromStr`) and that **sorts lexicographically in commit order** for its engine, so the
//! `__pos` column can be compared as a plain string by any query engine. Positions of
//! different engines are not comparable: [`Position::partial_cmp`] returns `None`.
//!
//! The tagged form used in checkpoints is `<engine>:<text>` (for example
//! `pg:00000001/6A2B3C40`); the `__pos` column carries only `<text>`. A MySQL checkpoint
//! (`mysql:mariadb-bin.000042:1234;f=…;e=…`) also carries the fingerprint that proves it
//! is resumed against the same binlog (see [`BinlogPosition`]).

mod gtid;
mod gtid_set;
mod mssql;
mod mysql;
mod pg;

pub use gtid::{Gtid, GtidPos, MAX_DOMAINS, TooManyDomains};
pub use gtid_set::{GtidSet, MAX_GNO, ParseGtidSetError, SourceUuid};
pub use mssql::Lsn as SqlServerLsn;
pub use mysql::{BinlogMark, BinlogPosition};
pub use pg::PgLsn;

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use crate::error::{Code, Error};

/// A position in some engine's change log.
// The MySQL variant is boxed: a binlog position carries its MariaDB GTID position inline
// (about 250 bytes), and every stream event holds a position by value, so an unboxed one
// would make each change event as large and every move of it a 272-byte copy.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Position {
    /// A PostgreSQL WAL location.
    Postgres(PgLsn),
    /// A SQL Server LSN (a transaction's commit LSN, `__$start_lsn`).
    SqlServer(SqlServerLsn),
    /// A MySQL / MariaDB binlog position.
    MySql(Box<BinlogPosition>),
}

impl Position {
    /// The engine tag used in the checkpoint form.
    pub fn engine(&self) -> &'static str {
        match self {
            Position::Postgres(_) => "pg",
            Position::SqlServer(_) => "mssql",
            Position::MySql(_) => "mysql",
        }
    }

    /// The untagged, lexicographically sortable text (the `__pos` form).
    pub fn sortable_text(&self) -> String {
        match self {
            Position::Postgres(lsn) => lsn.to_string(),
            Position::SqlServer(lsn) => lsn.to_string(),
            Position::MySql(pos) => pos.sortable_text(),
        }
    }

    /// [`Self::sortable_text`], shared: each change of a transaction holds it.
    pub fn sortable_arc(&self) -> std::sync::Arc<str> {
        match self {
            Position::Postgres(lsn) => std::sync::Arc::from(lsn.text().as_str()),
            other => std::sync::Arc::from(other.sortable_text()),
        }
    }

    /// The position just before this one: a baseline anchored here sorts before every
    /// change committed at or after it.
    pub fn just_before(&self) -> Position {
        match self {
            Position::Postgres(lsn) => Position::Postgres(PgLsn(lsn.0.saturating_sub(1))),
            Position::SqlServer(lsn) => Position::SqlServer(lsn.decrement().unwrap_or(*lsn)),
            // A MySQL change's `__pos` is the end of its commit event, which lies strictly
            // after the position the stream starts at: no change ties with the start.
            Position::MySql(pos) => Position::MySql(pos.clone()),
        }
    }

    /// Parses the tagged checkpoint form written by `Display`.
    pub fn parse_tagged(text: &str) -> Result<Self, Error> {
        text.parse()
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::MySql(pos) => write!(f, "{}:{}", self.engine(), pos.checkpoint_text()),
            _ => write!(f, "{}:{}", self.engine(), self.sortable_text()),
        }
    }
}

impl FromStr for Position {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self, Error> {
        let (engine, rest) = text.split_once(':').ok_or_else(|| bad_position(text))?;
        match engine {
            "pg" => rest
                .parse()
                .map(Position::Postgres)
                .map_err(|_| bad_position(text)),
            "mssql" => rest
                .parse()
                .map(Position::SqlServer)
                .map_err(|_| bad_position(text)),
            "mysql" => BinlogPosition::parse_checkpoint(rest)
                .map(|p| Position::MySql(Box::new(p)))
                .map_err(|_| bad_position(text)),
            _ => Err(bad_position(text)),
        }
    }
}

impl PartialOrd for Position {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        match (self, other) {
            (Position::Postgres(a), Position::Postgres(b)) => Some(a.cmp(b)),
            (Position::SqlServer(a), Position::SqlServer(b)) => Some(a.cmp(b)),
            (Position::MySql(a), Position::MySql(b)) => Some(a.cmp(b)),
            _ => None,
        }
    }
}

fn bad_position(text: &str) -> Error {
    Error::new(
        Code::StateCorrupt,
        format!("checkpoint position {text:?} is not a valid tagged position"),
    )
    .hint("the state item was edited or written by an incompatible version; restore it from a backup or re-baseline the stream (`sluice state show` prints it)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The shared `__pos` text is the sortable text, for every engine.
        #[test]
        fn the_shared_text_is_the_sortable_text(lsn in any::<u64>(), offset in any::<u32>()) {
            for position in [
                Position::Postgres(PgLsn(lsn)),
                Position::MySql(Box::new(BinlogPosition::new("mariadb-bin.000042", offset).unwrap())),
                "mssql:00000027:00000a8c:0003".parse().unwrap(),
            ] {
                let (shared, text) = (position.sortable_arc(), position.sortable_text());
                prop_assert_eq!(&*shared, text.as_str());
            }
        }
    }

    proptest! {
        /// Any text after an engine tag — hex-like, with separators and multi-byte
        /// characters — parses and prints back identically, or is refused; never a panic.
        #[test]
        fn any_tagged_text_parses_back_or_is_refused(
            tag in proptest::sample::select(vec!["pg:", "mysql:", "mssql:", "mssql:0x", "mssql:0X", ""]),
            body in "[0-9a-fA-F:/.#@ xXȼé😀-]{0,40}",
        ) {
            let text = format!("{tag}{body}");
            if let Ok(position) = Position::parse_tagged(&text) {
                prop_assert_eq!(Position::parse_tagged(&position.to_string()).ok(), Some(position));
            }
        }

        #[test]
        fn tagged_form_round_trips(raw in any::<u64>()) {
            let pos = Position::Postgres(PgLsn(raw));
            let back: Position = pos.to_string().parse().unwrap();
            prop_assert_eq!(back, pos);
        }

        #[test]
        fn sortable_text_orders_like_the_position(a in any::<u64>(), b in any::<u64>()) {
            let (pa, pb) = (Position::Postgres(PgLsn(a)), Position::Postgres(PgLsn(b)));
            prop_assert_eq!(pa.sortable_text().cmp(&pb.sortable_text()), a.cmp(&b));
            prop_assert_eq!(pa.partial_cmp(&pb), Some(a.cmp(&b)));
        }
    }

    proptest! {
        /// A SQL Server baseline's `__pos` is `just_before` the stream's start (the max
        /// LSN at the anchor): it sorts, as text, right before the start and so before
        /// every change the stream reads (all after the start), and round-trips tagged.
        #[test]
        fn sql_server_baseline_position_sorts_right_before_the_start(
            vlf in 0u32..=u32::MAX, block in any::<u32>(), record in any::<u16>(),
        ) {
            let start = SqlServerLsn { vlf, block, record };
            prop_assume!(!start.is_zero());
            let before = Position::SqlServer(start).just_before();
            let Position::SqlServer(lsn) = before else { panic!("{before:?}") };
            prop_assert_eq!(lsn.increment(), Some(start));
            let start = Position::SqlServer(start);
            prop_assert!(before.sortable_text() < start.sortable_text());
            prop_assert_eq!(before.partial_cmp(&start), Some(std::cmp::Ordering::Less));
            prop_assert_eq!(Position::parse_tagged(&before.to_string()).unwrap(), before);
        }
    }

    #[test]
    fn mysql_checkpoint_keeps_its_mark_and_never_compares_with_pg() {
        let text = "mysql:mariadb-bin.000042:1234;f=1733000000;e=16.31.1733000123";
        let pos: Position = text.parse().unwrap();
        assert_eq!(pos.to_string(), text);
        assert_eq!(pos.sortable_text(), "mariadb-bin.0000000042:0000001234");
        assert_eq!(pos.partial_cmp(&Position::Postgres(PgLsn(1))), None);
        assert_eq!(
            "mysql:nonsense".parse::<Position>().unwrap_err().code(),
            Code::StateCorrupt
        );
    }

    #[test]
    fn garbage_is_a_state_error() {
        for text in [
            "",
            "pg",
            "pg:",
            "pg:zz/1",
            "xx:00000000/00000000",
            "pg:0/0/0",
        ] {
            let err = text.parse::<Position>().unwrap_err();
            assert_eq!(err.code(), Code::StateCorrupt, "{text}");
        }
    }
}
