//! pgtier's benchmark kit: workloads, drivers, statistics and reports
//! (DESIGN.md §4). Every workload runs through [`target::Target`], so the same
//! code measures PostgreSQL alone, the pgtier server and the embedded engine.

pub mod result;
pub mod target;
