//! Side-by-side comparison of two result files.
