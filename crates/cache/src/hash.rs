//! A hash that names things PostgreSQL keeps across restarts (prepared
//! statements, replication objects, AWT lanes), so it must not change with
//! the process or the Rust version.

/// FNV-1a: the same value in every process and Rust version (prepared
/// statement names must fit PostgreSQL's 63 bytes; lanes must survive restarts).
pub(crate) fn stable_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}
