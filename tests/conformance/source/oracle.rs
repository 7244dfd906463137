//! The correctness oracle (`crate::oracle`) against each engine: seeded random workloads,
//! drains crashed at every fault point and by SIGKILL, then a replay of every part
//! compared with the source cell by cell. `make soak` runs it at length.

use super::Engine;

pub fn oracle<E: Engine>() {
    let Some(admin) = E::admin() else { return };
    let test = format!("conformance::source::{}::oracle", E::MODULE);
    crate::oracle::run(&*E::oracle(admin), &test, E::ORACLE_BUDGET_SECS);
}
