//! Typed log positions, one type per engine, behind one enum.
//!
//! Guarantees: every position has a text form that round-trips exactly (`Display` ↔
//! `FromStr`) and that **sorts lexicographically in commit order** for its engine, so the
//! `__pos` column can be compared as a plain string by any query engine. Positions of
//! different engines are not comparable: [`Position::partial_cmp`] returns `None`.
//!
//! The tagged form used in checkpoints is `<engine>:<text>` (for example
//! `pg:00000001/6A2B3C40`); the `__pos` column carries only `<text>`.

mod pg;

pub use pg::PgLsn;

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use crate::error::{Code, Error};

/// A position in some engine's change log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Position {
    /// A PostgreSQL WAL location.
    Postgres(PgLsn),
}

impl Position {
    /// The engine tag used in the checkpoint form.
    pub fn engine(&self) -> &'static str {
        match self {
            Position::Postgres(_) => "pg",
        }
    }

    /// The untagged, lexicographically sortable text (the `__pos` form).
    pub fn sortable_text(&self) -> String {
        match self {
            Position::Postgres(lsn) => lsn.to_string(),
        }
    }

    /// The position just before this one: a baseline anchored here sorts before every
    /// change committed at or after it.
    pub fn just_before(&self) -> Position {
        match self {
            Position::Postgres(lsn) => Position::Postgres(PgLsn(lsn.0.saturating_sub(1))),
        }
    }

    /// Parses the tagged checkpoint form written by `Display`.
    pub fn parse_tagged(text: &str) -> Result<Self, Error> {
        text.parse()
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.engine(), self.sortable_text())
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
            _ => Err(bad_position(text)),
        }
    }
}

impl PartialOrd for Position {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        match (self, other) {
            (Position::Postgres(a), Position::Postgres(b)) => Some(a.cmp(b)),
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
