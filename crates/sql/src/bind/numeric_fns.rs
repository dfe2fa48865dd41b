//! scale, min_scale and trim_scale of a numeric, float4send and float8send,
//! sinh / cosh / tanh (libm's, as PostgreSQL calls them):
//! small functions PostgreSQL 15's numeric.sql, float4.sql and float8.sql
//! read results through. Arguments convert as PostgreSQL's implicit casts
//! allow (integers and unknown literals to numeric or the float type; a
//! float never implicitly to numeric, a float8 never to real).

use pgtier_engine::DataType;

use super::{Binder, Ty};
use crate::error::{Result, SqlError};
use crate::expr::{Expr, Func};
use crate::value::{self, NUMERIC_ANY};

/// The functions [`Binder::numeric_function`] binds.
pub(super) const NUMERIC_FUNCTIONS: [&str; 8] =
    ["scale", "min_scale", "trim_scale", "float4send", "float8send", "sinh", "cosh", "tanh"];

impl Binder<'_> {
    pub(super) fn numeric_function(&mut self, name: &str, bound: Vec<(Expr, Ty)>, sig: &str) -> Result<(Expr, Ty)> {
        let undefined = || SqlError::undefined_function(sig);
        let [(e, t)]: [(Expr, Ty); 1] = bound.try_into().map_err(|_| undefined())?;
        let (want, f, result) = match name {
            "scale" => (NUMERIC_ANY, Func::Scale, DataType::Int4),
            "min_scale" => (NUMERIC_ANY, Func::MinScale, DataType::Int4),
            "trim_scale" => (NUMERIC_ANY, Func::TrimScale, NUMERIC_ANY),
            "float4send" => (DataType::Float4, Func::Float4Send, DataType::Bytea),
            "float8send" => (DataType::Float8, Func::Float8Send, DataType::Bytea),
            "sinh" => (DataType::Float8, Func::Sinh, DataType::Float8),
            "cosh" => (DataType::Float8, Func::Cosh, DataType::Float8),
            _ => (DataType::Float8, Func::Tanh, DataType::Float8),
        };
        let implicit = match t {
            None => true,
            Some(DataType::Numeric { .. }) => {
                want == NUMERIC_ANY || want == DataType::Float8 || want == DataType::Float4
            }
            Some(DataType::Float4) => want != NUMERIC_ANY,
            Some(DataType::Float8) => want == DataType::Float8,
            Some(t) => value::is_integer(t),
        };
        if !implicit {
            return Err(undefined());
        }
        let e = if t.is_none() { self.coerce(e, None, want, name)? } else { self.result_cast(e, t, Some(want))? };
        Ok((Expr::Func(f, vec![e]), Some(result)))
    }
}
