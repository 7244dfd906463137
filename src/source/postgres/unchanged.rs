//! Completing an UPDATE's new image from its full old image.
//!
//! PostgreSQL does not write an unchanged out-of-line (TOASTed) value into the WAL record
//! of an UPDATE; pgoutput sends it as "unchanged" (`u`). Under `REPLICA IDENTITY FULL` the
//! same record carries the whole old row with such values inlined, and an unchanged cell
//! is by definition equal to the old row's cell, so [`fill_from_old`] copies it over and
//! the new image has no unlogged cell. This holds for every update, key-changing or not.
//! Under a key-only old image (`DEFAULT` / `USING INDEX`) the non-key cells of the old
//! image are themselves unlogged and nothing is filled: the cell stays unlogged.

use crate::change::Value;

/// Moves each cell of `after` that the source did not log (`after_unlogged`) from the
/// logged old image `before` into `after`, and drops it from `after_unlogged`. A cell that
/// is also unlogged in the old image (`before_unlogged`) stays unlogged.
pub fn fill_from_old(
    before: &[Value],
    before_unlogged: &[usize],
    after: &mut [Value],
    after_unlogged: &mut Vec<usize>,
) {
    after_unlogged.retain(|&i| {
        let logged_before = !before_unlogged.contains(&i);
        match (before.get(i), after.get_mut(i)) {
            (Some(old), Some(new)) if logged_before => {
                *new = old.clone();
                false
            }
            _ => true,
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Value {
        Value::Text(s.into())
    }

    #[test]
    fn an_unchanged_cell_takes_the_old_value() {
        let before = [Value::Int(1), text("big"), text("a")];
        let mut after = vec![Value::Int(2), Value::Null, text("b")];
        let mut unlogged = vec![1];
        fill_from_old(&before, &[], &mut after, &mut unlogged);
        assert_eq!(after, [Value::Int(2), text("big"), text("b")]);
        assert!(unlogged.is_empty());
    }

    #[test]
    fn a_cell_the_old_image_did_not_log_stays_unlogged() {
        let before = [Value::Int(1), Value::Null, Value::Null];
        let mut after = vec![Value::Int(1), Value::Null, Value::Null];
        let mut unlogged = vec![1, 2];
        fill_from_old(&before, &[2], &mut after, &mut unlogged);
        assert_eq!(unlogged, [2]);
        assert_eq!(after[2], Value::Null);
        // Index 1 was logged as NULL in the old image: NULL is its value.
        assert_eq!(after[1], Value::Null);
    }

    #[test]
    fn an_index_outside_the_old_image_stays_unlogged() {
        let before = [Value::Int(1)];
        let mut after = vec![Value::Int(1), Value::Null];
        let mut unlogged = vec![1];
        fill_from_old(&before, &[], &mut after, &mut unlogged);
        assert_eq!(unlogged, [1]);
    }
}
