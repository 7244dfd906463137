//! The process's heap settings, applied once at start before any thread exists.
//!
//! Guarantee: on glibc, the heap a drain holds stays near the memory the part writers are
//! budgeted (`output.memory_budget_bytes`), whatever the number of tables:
//!
//! * at most [`ARENAS`] malloc arenas — glibc gives each new thread an arena of its own (up
//!   to 8 per CPU) and each arena keeps the pages its thread freed, so a job with one part
//!   encoder thread per table held freed batches many times over;
//! * allocations of [`MMAP_THRESHOLD`] bytes or more (batch buffers, encoded pages) are
//!   mapped and unmapped on their own, so a freed batch goes back to the system at once —
//!   glibc otherwise raises this threshold to the largest block freed (up to 32 MiB) and
//!   serves later batches from fragmented heap.
//!
//! Measured (tests/postgres/memory_budget.rs, 20 tables of 32 KiB rows under a 64 MiB
//! budget): 94 MiB peak RSS with glibc's defaults, 66 MiB with these. A setting the
//! operator gave in the environment (`MALLOC_ARENA_MAX`, `MALLOC_MMAP_THRESHOLD_`) wins.
//! Other C libraries are left as they are.

/// Arenas: one for the drain thread, one shared by the encoder threads.
pub const ARENAS: i32 = 2;

/// Blocks at least this large are mapped on their own.
pub const MMAP_THRESHOLD: i32 = 1024 * 1024;

/// Applies the settings; call first thing in `main`.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes allocator parameters; called before other threads.
        if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
            unsafe { libc::mallopt(libc::M_ARENA_MAX, ARENAS) };
        }
        if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
            unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) };
        }
    }
}
