//! The binder's side of the function registry (`expr::registry`): the
//! conversions a function's resolve step asks for, as the binder makes
//! them for operators and casts.

use pgtier_engine::DataType;

use super::coerce::{common_type, is_untyped_value, refuse_padded_literals};
use super::{Binder, Ty};
use crate::error::Result;
use crate::expr::{Expr, registry::ArgBinder};
use crate::value::ArithOp;

impl ArgBinder for Binder<'_> {
    fn coerce(&mut self, e: Expr, from: Ty, to: DataType, what: &str) -> Result<Expr> {
        Binder::coerce(self, e, from, to, what)
    }

    fn result_cast(&mut self, e: Expr, t: Ty, to: Ty) -> Result<Expr> {
        Binder::result_cast(self, e, t, to)
    }

    fn text_arg(&mut self, e: Expr, t: Ty, what: &str) -> Result<Expr> {
        Binder::text_arg(self, e, t, what)
    }

    fn int4_param(&mut self, e: Expr, t: Ty, sig: &str) -> Result<Expr> {
        Binder::int4_param(self, e, t, sig)
    }

    fn arith(&mut self, op: ArithOp, (x, xt): (Expr, Ty), (y, yt): (Expr, Ty)) -> Result<(Expr, Ty)> {
        Binder::arith(self, op, x, xt, y, yt)
    }

    fn unify_cmp(&mut self, (x, xt): (Expr, Ty), (y, yt): (Expr, Ty), op: &str) -> Result<(Expr, Expr)> {
        Binder::unify_cmp(self, x, xt, y, yt, op)
    }

    fn common(&mut self, args: Vec<(Expr, Ty)>, what: &str) -> Result<(Vec<Expr>, Ty)> {
        let types: Vec<Ty> = args.iter().map(|a| a.1).collect();
        let untyped: Vec<bool> = args.iter().map(|(e, t)| is_untyped_value(e, *t)).collect();
        refuse_padded_literals(&types, &untyped, what)?;
        let common = common_type(&types, what)?.or(Some(DataType::Text));
        let mut out = Vec::with_capacity(args.len());
        for (e, t) in args {
            out.push(Binder::result_cast(self, e, t, common)?);
        }
        Ok((out, common))
    }
}
