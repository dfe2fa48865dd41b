//! PostgreSQL client side of pgtier (skeleton).
