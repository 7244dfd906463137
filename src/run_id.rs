//! Run identifiers: `YYYYMMDDTHHMMSSmmmZ-<6 hex>`. They sort by start time (so part names
//! and run records list in run order) and are unique across concurrent starts.

use rand::Rng;

/// A new run id for a run starting now.
pub fn new_run_id() -> String {
    let now = chrono::Utc::now();
    let salt: u32 = rand::rng().random_range(0..0x100_0000);
    format!("{}Z-{salt:06x}", now.format("%Y%m%dT%H%M%S%3f"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_documented_shape_and_sort_by_time() {
        let a = new_run_id();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = new_run_id();
        assert_eq!(a.len(), "20261201T193833123Z-a1b2c3".len(), "{a}");
        assert!(a[..19] < b[..19], "{a} {b}");
        assert_ne!(a, b);
    }
}
