//! The spill room: what a run may hold in memory and on the local spill volume
//! (`output.spill_dir`; `/tmp` on Lambda), the files it keeps there, and the sweep that
//! removes what crashed runs left. Below both the part writers ([`crate::parts`]) and the
//! engines ([`crate::source`]), which share it without knowing each other.
//!
//! Guarantees:
//! * memory is bounded by configuration ([`memory_budget`]): one budget for the run,
//!   from which a MySQL / MariaDB transaction buffer is set aside first and the part
//!   writers share the rest;
//! * the spill volume bounds a transaction ([`disk_budget`]): a transaction that cannot
//!   fit is refused with the fix before it fills the volume;
//! * every spill file is named after its process and marked in use while it is
//!   ([`files`]), so [`sweep`] removes only what no live process owns;
//! * a full or unwritable spill volume is a refusal naming the setting ([`errors`]).

pub mod disk_budget;
pub mod errors;
pub mod files;
pub mod memory_budget;
pub mod sweep;
