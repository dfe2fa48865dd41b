//! Charts of result files (PNG and SVG).
