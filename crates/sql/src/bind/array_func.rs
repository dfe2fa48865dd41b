//! Real arrays' operators and functions: `||`, `@>` `<@` `&&`, and
//! array_append .. string_to_array, with PostgreSQL 15's anycompatible
//! resolution (an element and an array meet at their common type).

use pgtier_engine::DataType;
use sqlparser::ast;

use super::coerce::common_type;
use super::{Binder, Ty};
use crate::error::{Result, SqlError};
use crate::expr::{ArrayFunc, Expr, Func};
use crate::value;
use crate::value::array::{array_type, elem_type, is_array};

/// The functions bound here when an argument is a real array (or always,
/// for string_to_array).
const ARRAY_FUNCTIONS: &[&str] = &[
    "array_append",
    "array_prepend",
    "array_cat",
    "cardinality",
    "array_ndims",
    "array_dims",
    "array_length",
    "array_lower",
    "array_upper",
    "array_position",
    "array_positions",
    "array_remove",
    "array_replace",
    "array_to_string",
    "string_to_array",
];

/// The ones the system catalogs' text-form arrays do not have too.
const ARRAY_ONLY: &[&str] = &[
    "array_append",
    "array_prepend",
    "array_cat",
    "array_ndims",
    "array_dims",
    "array_position",
    "array_positions",
    "array_remove",
    "array_replace",
    "string_to_array",
];

pub(super) fn is_array_call(name: &str, args: &[(Expr, Ty)]) -> bool {
    ARRAY_ONLY.contains(&name) || (ARRAY_FUNCTIONS.contains(&name) && args.iter().any(|(_, t)| is_array(*t)))
}

impl Binder<'_> {
    /// `e` as a value of `to` (an element or array type); `sig` names the
    /// call for 42883.
    fn as_type(&mut self, e: Expr, t: Ty, to: DataType, sig: &str) -> Result<Expr> {
        match t {
            None => self.coerce(e, None, to, sig),
            Some(f) if f == to => Ok(e),
            Some(f) if super::array::comparable(f, to) => Ok(Expr::Cast(e.boxed(), to, false)),
            Some(_) => Err(SqlError::undefined_function(sig)),
        }
    }

    /// The common element type of arrays and elements (anycompatible).
    fn common_elem(&self, arrays: &[Ty], elems: &[Ty], sig: &str) -> Result<DataType> {
        let mut types: Vec<Ty> = arrays.iter().map(|t| t.and_then(elem_type)).collect();
        types.extend_from_slice(elems);
        let common = common_type(&types, sig).map_err(|_| SqlError::undefined_function(sig))?;
        Ok(common.unwrap_or(DataType::Text))
    }

    /// `x || y` where a side is a real array: concatenation, append or
    /// prepend (an untyped side is an array, as PostgreSQL resolves it).
    pub(super) fn real_concat(&mut self, x: Expr, xt: Ty, y: Expr, yt: Ty) -> Result<(Expr, Ty)> {
        let sig = format!("{} || {}", xt.map_or("unknown", value::type_name), yt.map_or("unknown", value::type_name));
        let bad = || SqlError::undefined_operator(&sig);
        let (f, arrays, elems) = match (is_array(xt) || xt.is_none(), is_array(yt) || yt.is_none()) {
            (true, true) => (ArrayFunc::Cat, vec![xt, yt], vec![]),
            (true, false) => (ArrayFunc::Append, vec![xt], vec![yt]),
            (false, true) => (ArrayFunc::Prepend, vec![yt], vec![xt]),
            (false, false) => return Err(bad()),
        };
        let elem = self.common_elem(&arrays, &elems, &sig).map_err(|_| bad())?;
        let arr = array_type(elem).ok_or_else(bad)?;
        let (xw, yw) = match f {
            ArrayFunc::Cat => (arr, arr),
            ArrayFunc::Append => (arr, elem),
            _ => (elem, arr),
        };
        let x = self.as_type(x, xt, xw, &sig).map_err(|_| bad())?;
        let y = self.as_type(y, yt, yw, &sig).map_err(|_| bad())?;
        Ok((Expr::Func(Func::Array(f), vec![x, y]), Some(arr)))
    }

    /// `@>`, `<@`, `&&`; None when neither side is a real array.
    pub(super) fn array_set_op(
        &mut self,
        op: &ast::BinaryOperator,
        x: Expr,
        xt: Ty,
        y: Expr,
        yt: Ty,
    ) -> Result<Option<(Expr, Ty)>> {
        let f = match op {
            ast::BinaryOperator::AtArrow => ArrayFunc::Contains,
            ast::BinaryOperator::ArrowAt => ArrayFunc::ContainedBy,
            ast::BinaryOperator::PGOverlap => ArrayFunc::Overlap,
            _ => return Ok(None),
        };
        if !is_array(xt) && !is_array(yt) {
            return Ok(None);
        }
        let sig = format!("{} {op} {}", xt.map_or("unknown", value::type_name), yt.map_or("unknown", value::type_name));
        let bad = || SqlError::undefined_operator(&sig);
        if !(is_array(xt) || xt.is_none()) || !(is_array(yt) || yt.is_none()) {
            return Err(bad());
        }
        if let (Some(a), Some(b)) = (xt, yt)
            && !crate::value::array::same_array_type(a, b)
        {
            return Err(bad());
        }
        let elem = self.common_elem(&[xt, yt], &[], &sig).map_err(|_| bad())?;
        let arr = array_type(elem).ok_or_else(bad)?;
        let x = self.as_type(x, xt, arr, &sig).map_err(|_| bad())?;
        let y = self.as_type(y, yt, arr, &sig).map_err(|_| bad())?;
        Ok(Some((Expr::Func(Func::Array(f), vec![x, y]), Some(DataType::Bool))))
    }

    /// An array function call (`is_array_call` said so).
    pub(super) fn array_function(&mut self, name: &str, args: Vec<(Expr, Ty)>, sig: &str) -> Result<(Expr, Ty)> {
        use DataType::{Int4, Text};
        let bad = || SqlError::undefined_function(sig);
        let n = args.len();
        let types: Vec<Ty> = args.iter().map(|a| a.1).collect();
        // (function, which arguments are arrays / elements / of a fixed type, result)
        #[derive(Clone, Copy)]
        enum Arg {
            Arr,
            Elem,
            Fixed(DataType),
        }
        let (f, shape, result): (ArrayFunc, Vec<Arg>, Option<DataType>) = match (name, n) {
            ("array_append", 2) => (ArrayFunc::Append, vec![Arg::Arr, Arg::Elem], None),
            ("array_prepend", 2) => (ArrayFunc::Prepend, vec![Arg::Elem, Arg::Arr], None),
            ("array_cat", 2) => (ArrayFunc::Cat, vec![Arg::Arr, Arg::Arr], None),
            ("cardinality", 1) => (ArrayFunc::Cardinality, vec![Arg::Arr], Some(Int4)),
            ("array_ndims", 1) => (ArrayFunc::Ndims, vec![Arg::Arr], Some(Int4)),
            ("array_dims", 1) => (ArrayFunc::Dims, vec![Arg::Arr], Some(Text)),
            ("array_length", 2) => (ArrayFunc::Length, vec![Arg::Arr, Arg::Fixed(Int4)], Some(Int4)),
            ("array_lower", 2) => (ArrayFunc::Lower, vec![Arg::Arr, Arg::Fixed(Int4)], Some(Int4)),
            ("array_upper", 2) => (ArrayFunc::Upper, vec![Arg::Arr, Arg::Fixed(Int4)], Some(Int4)),
            ("array_position", 2 | 3) => (ArrayFunc::Position, vec![Arg::Arr, Arg::Elem, Arg::Fixed(Int4)], Some(Int4)),
            ("array_positions", 2) => (ArrayFunc::Positions, vec![Arg::Arr, Arg::Elem], array_type(Int4)),
            ("array_remove", 2) => (ArrayFunc::Remove, vec![Arg::Arr, Arg::Elem], None),
            ("array_replace", 3) => (ArrayFunc::Replace, vec![Arg::Arr, Arg::Elem, Arg::Elem], None),
            ("array_to_string", 2 | 3) => {
                (ArrayFunc::ToString, vec![Arg::Arr, Arg::Fixed(Text), Arg::Fixed(Text)], Some(Text))
            }
            ("string_to_array", 2 | 3) => (ArrayFunc::StringToArray, vec![Arg::Fixed(Text); 3], array_type(Text)),
            _ => return Err(bad()),
        };
        let arrays: Vec<Ty> =
            shape.iter().zip(&types).filter(|(s, _)| matches!(s, Arg::Arr)).map(|(_, t)| *t).collect();
        let elems: Vec<Ty> =
            shape.iter().zip(&types).filter(|(s, _)| matches!(s, Arg::Elem)).map(|(_, t)| *t).collect();
        if arrays.iter().any(|t| t.is_some_and(|t| !matches!(t, DataType::Array(_)))) {
            return Err(bad());
        }
        let elem = if arrays.is_empty() { Text } else { self.common_elem(&arrays, &elems, sig)? };
        let arr = array_type(elem).ok_or_else(bad)?;
        let mut out = Vec::with_capacity(n);
        for ((e, t), s) in args.into_iter().zip(&shape) {
            out.push(match s {
                Arg::Arr => self.as_type(e, t, arr, sig)?,
                Arg::Elem => self.as_type(e, t, elem, sig)?,
                Arg::Fixed(Text) => self.text_arg(e, t, name).map_err(|_| bad())?,
                Arg::Fixed(w) => match t {
                    None => self.coerce(e, None, *w, name)?,
                    Some(t) if value::is_int4_implicit(t) => e,
                    Some(_) => return Err(bad()),
                },
            });
        }
        Ok((Expr::Func(Func::Array(f), out), Some(result.unwrap_or(arr))))
    }
}
