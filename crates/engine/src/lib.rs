//! pgtier embedded storage engine (skeleton).
