//! pgtier's benchmark kit: workloads, drivers, statistics and reports
//! (DESIGN.md §4). Every workload runs through [`target::Target`], so the same
//! code measures PostgreSQL alone, the pgtier server and the embedded engine.

// Result files, charts and comparisons (read by every consumer of a run).
pub mod chart;
pub mod compare;
pub mod result;
pub mod target;

// Workloads, drivers, statistics, targets: modules below this line.
pub mod ch;
pub mod cpu;
pub mod demo;
pub mod device;
pub mod driver;
pub mod flash_demo;
pub mod htap_demo;
pub mod io;
pub mod jpetstore;
pub mod micro;
pub mod progress;
pub mod report;
pub mod soak;
pub mod stats;
pub mod targets;
pub mod tatp;
pub mod tpcc;
pub mod tpch;
pub mod warmup;
