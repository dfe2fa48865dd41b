//! Systems the benchmark kit can measure, each behind [`crate::target::Target`].

pub mod cached;
pub mod embedded;
pub mod pgwire;
pub mod postgres;
