//! Hive-style partitions of change parts by commit time (`output.layout`).
//!
//! Guarantees: a change's partition is a pure function of the layout and its commit time
//! (`__ts`, microseconds since the Unix epoch, UTC) — `dt=YYYY-MM-DD` for `dated`,
//! `dt=YYYY-MM-DD/hr=HH` for `dated-hourly`, none for `flat`. All changes of one
//! transaction share its commit time, so they share a partition: a part is split at a
//! partition boundary only between transactions. A change without a commit time (a source
//! that does not report it) goes to Hive's null partition, `dt=__HIVE_DEFAULT_PARTITION__`
//! (and `hr=__HIVE_DEFAULT_PARTITION__`), which every Hive-style reader reads as NULL.

use chrono::{DateTime, Timelike};

use crate::config::Layout;

/// Hive's folder value for a NULL partition value.
pub const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

const MICROS_PER_HOUR: i64 = 3_600_000_000;
const MICROS_PER_DAY: i64 = 24 * MICROS_PER_HOUR;

/// The partition a change falls in, cheap to compare per change: the number of the day
/// or hour since the epoch (`None` for no commit time). Every change of a `flat` layout
/// is in the one bucket `Some(0)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket(Option<i64>);

/// The bucket of a change committed at `commit_ts` (µs, UTC).
pub fn bucket(layout: Layout, commit_ts: Option<i64>) -> Bucket {
    match layout {
        Layout::Flat => Bucket(Some(0)),
        Layout::Dated => Bucket(commit_ts.map(|ts| ts.div_euclid(MICROS_PER_DAY))),
        Layout::DatedHourly => Bucket(commit_ts.map(|ts| ts.div_euclid(MICROS_PER_HOUR))),
    }
}

/// The partition folder of `bucket` (`dt=2026-12-03`, `dt=2026-12-03/hr=07`), without a
/// trailing `/`; `None` for the `flat` layout.
pub fn folder(layout: Layout, bucket: Bucket) -> Option<String> {
    let start = match (layout, bucket.0) {
        (Layout::Flat, _) => return None,
        (_, None) => {
            return Some(match layout {
                Layout::DatedHourly => format!("dt={NULL_PARTITION}/hr={NULL_PARTITION}"),
                _ => format!("dt={NULL_PARTITION}"),
            });
        }
        (Layout::Dated, Some(day)) => day * MICROS_PER_DAY,
        (Layout::DatedHourly, Some(hour)) => hour * MICROS_PER_HOUR,
    };
    // Out of chrono's range (± 262,000 years) only for a corrupt timestamp, which the
    // part's own `__ts` column would refuse first; name it rather than panic.
    let Some(at) = DateTime::from_timestamp_micros(start) else {
        return Some(format!("dt={NULL_PARTITION}"));
    };
    let day = at.format("%Y-%m-%d");
    Some(match layout {
        Layout::DatedHourly => format!("dt={day}/hr={:02}", at.hour()),
        _ => format!("dt={day}"),
    })
}

/// The partition folder of a change committed at `commit_ts` ([`bucket`] then
/// [`folder`]).
pub fn folder_of(layout: Layout, commit_ts: Option<i64>) -> Option<String> {
    folder(layout, bucket(layout, commit_ts))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-12-03T23:59:59.999999Z in µs.
    const LAST_MICRO_OF_DEC_3: i64 = 1_796_342_399_999_999;

    #[test]
    fn a_day_ends_at_utc_midnight_and_an_hour_at_the_full_hour() {
        let ts = Some(LAST_MICRO_OF_DEC_3);
        let next = Some(LAST_MICRO_OF_DEC_3 + 1);
        assert_eq!(folder_of(Layout::Dated, ts).unwrap(), "dt=2026-12-03");
        assert_eq!(folder_of(Layout::Dated, next).unwrap(), "dt=2026-12-04");
        assert_eq!(
            folder_of(Layout::DatedHourly, ts).unwrap(),
            "dt=2026-12-03/hr=23"
        );
        assert_eq!(
            folder_of(Layout::DatedHourly, next).unwrap(),
            "dt=2026-12-04/hr=00"
        );
        assert_ne!(bucket(Layout::Dated, ts), bucket(Layout::Dated, next));
        let earlier = Some(LAST_MICRO_OF_DEC_3 - MICROS_PER_HOUR);
        assert_eq!(bucket(Layout::Dated, ts), bucket(Layout::Dated, earlier));
        assert_ne!(
            bucket(Layout::DatedHourly, ts),
            bucket(Layout::DatedHourly, earlier)
        );
    }

    #[test]
    fn flat_has_no_partition_and_a_missing_time_the_null_one() {
        assert_eq!(folder_of(Layout::Flat, Some(LAST_MICRO_OF_DEC_3)), None);
        assert_eq!(folder_of(Layout::Flat, None), None);
        assert_eq!(
            bucket(Layout::Flat, None),
            bucket(Layout::Flat, Some(LAST_MICRO_OF_DEC_3))
        );
        assert_eq!(
            folder_of(Layout::Dated, None).unwrap(),
            "dt=__HIVE_DEFAULT_PARTITION__"
        );
        assert_eq!(
            folder_of(Layout::DatedHourly, None).unwrap(),
            "dt=__HIVE_DEFAULT_PARTITION__/hr=__HIVE_DEFAULT_PARTITION__"
        );
    }

    #[test]
    fn times_before_1970_fall_in_their_own_day() {
        // 1969-12-31T23:00:00Z
        let ts = Some(-MICROS_PER_HOUR);
        assert_eq!(folder_of(Layout::Dated, ts).unwrap(), "dt=1969-12-31");
        assert_eq!(
            folder_of(Layout::DatedHourly, ts).unwrap(),
            "dt=1969-12-31/hr=23"
        );
    }
}
