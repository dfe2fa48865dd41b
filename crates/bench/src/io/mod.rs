//! `pgtier bench io`: study 001's ORION-style calibration of the device
//! that will hold pgtier's flash tier file. A grid of modes (random and
//! sequential reads and writes, a random read/write mix) × block sizes ×
//! queue depths, each point measured for a fixed window after a warm-up:
//! IOPS, MB/s, latency percentiles per I/O and this process's CPU. Queue
//! depth N is N threads, each with one synchronous `pread`/`pwrite`
//! outstanding; with fio installed, each point runs again as the
//! equivalent fio job (`--ioengine=psync --numjobs=N`) and both stand side
//! by side, so a flash tier's goals can be set relative to what the
//! device gives (reference/flash-and-htap-anchors.md §0).
//!
//! - [`spec`]: the grid and its checks (every error names its flag);
//! - [`target`]: the file, preallocated and filled once (or a block
//!   device), O_DIRECT or the fallback to buffered I/O;
//! - [`measure`]: one point's threads, window, histograms and CPU;
//! - [`fio`]: the equivalent fio job, run and parsed;
//! - [`sweep`]: one point with both, and the run's result file;
//! - [`output`]: table, `results.json`, `results.csv`, the chart.

mod buffer;
pub mod fio;
pub mod measure;
pub mod output;
pub mod spec;
pub mod sweep;
pub mod target;

use crate::chart::ChartError;
use crate::report::ReportError;

#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// Bad input; the message names the flag.
    #[error("{0}")]
    Invalid(String),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error(transparent)]
    Chart(#[from] ChartError),
}

pub(crate) fn io_error(what: impl Into<String>, source: std::io::Error) -> IoError {
    IoError::Io { what: what.into(), source }
}
