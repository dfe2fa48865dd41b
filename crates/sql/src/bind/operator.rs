//! Operators: comparison, AND / OR, `||`, arithmetic, regular-expression
//! matches and COLLATE.

use pgtier_engine::DataType;
use sqlparser::ast::{self, ObjectName};

use super::array::is_array_ast;
use super::coerce::constant_truth;
use super::{Binder, ExprCtx, Scope, Ty, parts};
use crate::error::{Result, SqlError};
use crate::expr::{BitOp, CmpOp, Expr, Func, SysFunc};
use crate::value::{self, ArithOp, Category, category, type_name};

impl Binder<'_> {
    /// Binds both sides of a comparison with a common type.
    pub(super) fn comparable(
        &mut self,
        a: &ast::Expr,
        b: &ast::Expr,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
        op: &str,
    ) -> Result<(Expr, Expr)> {
        let (x, xt) = self.expr(a, scope, ctx)?;
        let (y, yt) = self.expr(b, scope, ctx)?;
        self.unify_cmp(x, xt, y, yt, op)
    }

    pub(super) fn binary(
        &mut self,
        left: &ast::Expr,
        op: &ast::BinaryOperator,
        right: &ast::Expr,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        use ast::BinaryOperator as B;
        let cmp = match op {
            B::Eq => Some(CmpOp::Eq),
            B::NotEq => Some(CmpOp::NotEq),
            B::Lt => Some(CmpOp::Lt),
            B::LtEq => Some(CmpOp::LtEq),
            B::Gt => Some(CmpOp::Gt),
            B::GtEq => Some(CmpOp::GtEq),
            _ => None,
        };
        if let Some(c) = cmp {
            let (x, y) = self.comparable(left, right, scope, ctx, c.symbol())?;
            return Ok((Expr::Cmp(c, x.boxed(), y.boxed()), Some(DataType::Bool)));
        }
        let (x, xt) = self.expr(left, scope, ctx)?;
        // PostgreSQL stops simplifying an AND at a false constant, an OR at
        // a true one (simplify_and_arguments).
        let decided = match op {
            B::And => constant_truth(&x) == Some(Some(false)),
            B::Or => constant_truth(&x) == Some(Some(true)),
            _ => false,
        };
        let (y, yt) = self.lazily(decided, |b| b.expr(right, scope, ctx))?;
        let (x, y) = if (xt == Some(DataType::Jsonb) || yt == Some(DataType::Jsonb))
            && matches!(op, B::StringConcat | B::Minus)
        {
            match self.jsonb_binary(op, x.clone(), xt, y.clone(), yt)? {
                Some(done) => return Ok(done),
                None => (x, y),
            }
        } else {
            (x, y)
        };
        if matches!(op, B::StringConcat) && (crate::value::array::is_array(xt) || crate::value::array::is_array(yt)) {
            return self.real_concat(x, xt, y, yt);
        }
        if matches!(op, B::AtArrow | B::ArrowAt | B::PGOverlap)
            && (crate::value::array::is_array(xt) || crate::value::array::is_array(yt))
        {
            return self.array_set_op(op, x, xt, y, yt)?.ok_or_else(|| SqlError::unsupported(format!("operator {op}")));
        }
        match op {
            B::And | B::Or => {
                let name = if matches!(op, B::And) { "AND" } else { "OR" };
                let x = self.boolean(x, xt, name)?;
                let y = self.boolean(y, yt, name)?;
                let mut parts = Vec::new();
                for e in [x, y] {
                    match (op, e) {
                        (B::And, Expr::And(v)) | (B::Or, Expr::Or(v)) => parts.extend(v),
                        (_, e) => parts.push(e),
                    }
                }
                Ok((if matches!(op, B::And) { Expr::And(parts) } else { Expr::Or(parts) }, Some(DataType::Bool)))
            }
            B::StringConcat
                if matches!(
                    (xt, yt),
                    (Some(DataType::Bytea), Some(DataType::Bytea) | None) | (None, Some(DataType::Bytea))
                ) =>
            {
                let x = self.coerce(x, xt, DataType::Bytea, "||")?;
                let y = self.coerce(y, yt, DataType::Bytea, "||")?;
                Ok((Expr::Func(crate::expr::Func::ByteaConcat, vec![x, y]), Some(DataType::Bytea)))
            }
            B::StringConcat => {
                refuse_text_search_concat(xt, yt)?;
                let stringy = |t: Ty| t.is_none_or(|t| category(t) == Category::String);
                if !stringy(xt) && !stringy(yt) {
                    return Err(SqlError::undefined_operator(&format!(
                        "{} || {}",
                        type_name(xt.unwrap_or(DataType::Text)),
                        type_name(yt.unwrap_or(DataType::Text))
                    )));
                }
                let x = match xt {
                    None => self.coerce(x, None, DataType::Text, "||")?,
                    Some(DataType::Char(_)) => Expr::BpcharTrim(x.boxed()),
                    _ => crate::expr::reg_as_name(x, xt),
                };
                let y = match yt {
                    None => self.coerce(y, None, DataType::Text, "||")?,
                    Some(DataType::Char(_)) => Expr::BpcharTrim(y.boxed()),
                    _ => crate::expr::reg_as_name(y, yt),
                };
                Ok((Expr::Concat(x.boxed(), y.boxed()), Some(DataType::Text)))
            }
            B::Plus | B::Minus | B::Multiply | B::Divide | B::Modulo => {
                let aop = match op {
                    B::Plus => ArithOp::Add,
                    B::Minus => ArithOp::Sub,
                    B::Multiply => ArithOp::Mul,
                    B::Divide => ArithOp::Div,
                    _ => ArithOp::Mod,
                };
                self.arith(aop, x, xt, y, yt)
            }
            B::BitwiseAnd | B::BitwiseOr | B::PGBitwiseXor => {
                let bop = match op {
                    B::BitwiseAnd => BitOp::And,
                    B::BitwiseOr => BitOp::Or,
                    _ => BitOp::Xor,
                };
                self.bitwise(bop, x, xt, y, yt)
            }
            B::PGBitwiseShiftLeft | B::PGBitwiseShiftRight => {
                let bop = if matches!(op, B::PGBitwiseShiftLeft) { BitOp::Shl } else { BitOp::Shr };
                self.shift(bop, x, xt, y, yt)
            }
            other => Err(SqlError::unsupported(format!("operator {other}"))),
        }
    }

    /// `<<` and `>>` of an integer by an int4 (int2shl, int4shl, int8shl):
    /// the result has the left side's type. Other left types (bit, inet,
    /// ranges, geometry) and an untyped one (PostgreSQL weighs them all)
    /// are refused.
    fn shift(&mut self, op: BitOp, x: Expr, xt: Ty, y: Expr, yt: Ty) -> Result<(Expr, Ty)> {
        let Some(ty) = xt.filter(|t| value::is_integer(*t)) else {
            return Err(SqlError::unsupported(format!(
                "operator {} of {}",
                op.symbol(),
                xt.map_or("unknown", type_name)
            )));
        };
        let y = match yt {
            None => self.coerce(y, None, DataType::Int4, op.symbol())?,
            Some(t) if value::is_int4_implicit(t) => self.result_cast(y, yt, Some(DataType::Int4))?,
            Some(t) => {
                return Err(SqlError::undefined_operator(&format!(
                    "{} {} {}",
                    type_name(ty),
                    op.symbol(),
                    type_name(t)
                )));
            }
        };
        Ok((Expr::Func(Func::Sys(SysFunc::Bit(op, ty)), vec![x, y]), Some(ty)))
    }

    /// The prefix operators besides NOT, `-` and `+`: `~` (int2not,
    /// int4not, int8not), `@` (abs), `|/` (float8 sqrt) and `||/` (cbrt).
    pub(super) fn prefix_operator(&mut self, op: &ast::UnaryOperator, x: Expr, t: Ty) -> Result<(Expr, Ty)> {
        use ast::UnaryOperator as U;
        let undefined = || SqlError::undefined_operator(&format!("{op} {}", t.map_or("unknown", type_name)));
        let Some(ty) = t else {
            // An untyped operand: PostgreSQL weighs every type's operator.
            return Err(SqlError::unsupported(format!("operator {op} of an untyped literal")));
        };
        match op {
            U::BitwiseNot if value::is_integer(ty) => {
                Ok((Expr::Func(Func::Sys(SysFunc::Bit(BitOp::Not, ty)), vec![x]), Some(ty)))
            }
            U::PGAbs if category(ty) == Category::Numeric => self.bound_function("abs", vec![(x, t)]),
            U::PGSquareRoot | U::PGCubeRoot if category(ty) == Category::Numeric => {
                let x = self.coerce(x, t, DataType::Float8, &op.to_string())?;
                let name = if matches!(op, U::PGSquareRoot) { "sqrt" } else { "cbrt" };
                self.bound_function(name, vec![(x, Some(DataType::Float8))])
            }
            U::BitwiseNot | U::PGAbs | U::PGSquareRoot | U::PGCubeRoot if category(ty) == Category::String => {
                Err(undefined())
            }
            _ => Err(SqlError::unsupported(format!("operator {op} of {}", type_name(ty)))),
        }
    }

    /// `&`, `|`, `#` on integers (PostgreSQL has them for int2, int4 and
    /// int8 alike; a narrower side is widened, an unknown one takes the
    /// other's type).
    fn bitwise(&mut self, op: BitOp, x: Expr, xt: Ty, y: Expr, yt: Ty) -> Result<(Expr, Ty)> {
        let ty = match (xt, yt) {
            (None, None) => DataType::Int4,
            (Some(t), None) | (None, Some(t)) => t,
            (Some(a), Some(b)) if value::is_integer(a) && value::is_integer(b) => value::numeric_common(a, b),
            (Some(a), Some(b)) => {
                return Err(SqlError::undefined_operator(&format!(
                    "{} {} {}",
                    type_name(a),
                    op.symbol(),
                    type_name(b)
                )));
            }
        };
        if !value::is_integer(ty) {
            let name = |t: Ty| t.map_or("unknown", type_name);
            return Err(SqlError::undefined_operator(&format!("{} {} {}", name(xt), op.symbol(), name(yt))));
        }
        let x = self.coerce(x, xt, ty, op.symbol())?;
        let y = self.coerce(y, yt, ty, op.symbol())?;
        Ok((Expr::Func(Func::Sys(SysFunc::Bit(op, ty)), vec![x, y]), Some(ty)))
    }

    pub(super) fn arith(&mut self, op: ArithOp, x: Expr, xt: Ty, y: Expr, yt: Ty) -> Result<(Expr, Ty)> {
        let (x, xt, y, yt) = match (xt, yt) {
            (None, None) => {
                return Err(SqlError::new("42725", format!("operator is not unique: unknown {} unknown", op.symbol())));
            }
            (None, Some(t)) => {
                let t2 = if t == DataType::Date { DataType::Int4 } else { untyped_addend(op, t) };
                (self.coerce(x, None, t2, op.symbol())?, t2, y, t)
            }
            (Some(t), None) => {
                let t2 = if t == DataType::Date && op != ArithOp::Sub { DataType::Int4 } else { t };
                let t2 =
                    if t == DataType::Date && op == ArithOp::Sub { DataType::Int4 } else { untyped_addend(op, t2) };
                let y = self.coerce(y, None, t2, op.symbol())?;
                (x, t, y, t2)
            }
            (Some(a), Some(b)) => (x, a, y, b),
        };
        let bad = || SqlError::undefined_operator(&format!("{} {} {}", type_name(xt), op.symbol(), type_name(yt)));
        let result = match (category(xt), category(yt)) {
            (Category::Numeric, Category::Numeric) => {
                let t = value::numeric_common(xt, yt);
                if op == ArithOp::Mod && value::is_float(t) {
                    return Err(bad());
                }
                t
            }
            // date ± integer only: bigint is not implicitly integer.
            (Category::DateTime, Category::Numeric)
                if xt == DataType::Date && value::is_int4_implicit(yt) && matches!(op, ArithOp::Add | ArithOp::Sub) =>
            {
                DataType::Date
            }
            (Category::Numeric, Category::DateTime)
                if yt == DataType::Date && value::is_int4_implicit(xt) && op == ArithOp::Add =>
            {
                DataType::Date
            }
            (Category::DateTime, Category::Time) | (Category::Time, Category::DateTime)
                if (xt == DataType::Date || yt == DataType::Date) && op == ArithOp::Add =>
            {
                DataType::Timestamp(None)
            }
            (Category::Time, Category::Time) | (Category::Interval, Category::Interval) if op == ArithOp::Sub => {
                DataType::Interval
            }
            (Category::Interval, Category::Interval) if op == ArithOp::Add => DataType::Interval,
            (Category::DateTime, Category::Interval) if matches!(op, ArithOp::Add | ArithOp::Sub) => instant_type(xt),
            (Category::Interval, Category::DateTime) if op == ArithOp::Add => instant_type(yt),
            (Category::Time, Category::Interval) if matches!(op, ArithOp::Add | ArithOp::Sub) => DataType::Time(None),
            (Category::TimeTz, Category::Interval) if matches!(op, ArithOp::Add | ArithOp::Sub) => {
                DataType::TimeTz(None)
            }
            (Category::Interval, Category::TimeTz) if op == ArithOp::Add => DataType::TimeTz(None),
            (Category::DateTime, Category::TimeTz) | (Category::TimeTz, Category::DateTime)
                if (xt == DataType::Date || yt == DataType::Date) && op == ArithOp::Add =>
            {
                DataType::TimestampTz(None)
            }
            (Category::Interval, Category::Time) if op == ArithOp::Add => DataType::Time(None),
            // interval * float8, float8 * interval, interval / float8: the
            // number is cast to float8 as PostgreSQL's implicit casts do.
            (Category::Interval, Category::Numeric) if matches!(op, ArithOp::Mul | ArithOp::Div) => {
                let y = if value::is_float(yt) { y } else { Expr::Cast(y.boxed(), DataType::Float8, false) };
                return self.interval_scaled(op, x, y);
            }
            (Category::Numeric, Category::Interval) if op == ArithOp::Mul => {
                let x = if value::is_float(xt) { x } else { Expr::Cast(x.boxed(), DataType::Float8, false) };
                return self.interval_scaled(op, y, x);
            }
            // PostgreSQL finds several candidates (time + interval, date + time).
            (Category::Time, Category::Time) if op == ArithOp::Add => {
                return Err(SqlError::new(
                    "42725",
                    format!("operator is not unique: {} + {}", type_name(xt), type_name(yt)),
                ));
            }
            (Category::DateTime, Category::DateTime)
                if xt == DataType::Date && yt == DataType::Date && op == ArithOp::Sub =>
            {
                return Ok((Expr::Arith(op, x.boxed(), y.boxed(), DataType::Date), Some(DataType::Int4)));
            }
            // timestamp - timestamp (a date as its midnight): whole days and the rest.
            (Category::DateTime, Category::DateTime) if op == ArithOp::Sub => DataType::Interval,
            _ => return Err(bad()),
        };
        // Floats compute in f64 after a cast of the integer/numeric side.
        let (x, y) = if value::is_float(result) {
            let f = |e: Expr, t: DataType| {
                if value::is_float(t) { e } else { Expr::Cast(e.boxed(), DataType::Float8, false) }
            };
            (f(x, xt), f(y, yt))
        } else {
            (x, y)
        };
        if let (Expr::Const(a), Expr::Const(b)) = (&x, &y) {
            let folded = value::arith(op, a, b, result);
            return Ok((self.folded(folded, || Expr::Arith(op, x.boxed(), y.boxed(), result))?, Some(result)));
        }
        Ok((Expr::Arith(op, x.boxed(), y.boxed(), result), Some(result)))
    }

    /// `interval * float8` (either order: `v` is the interval) or `interval / float8`.
    fn interval_scaled(&mut self, op: ArithOp, v: Expr, factor: Expr) -> Result<(Expr, Ty)> {
        if let (Expr::Const(a), Expr::Const(b)) = (&v, &factor) {
            let folded = value::arith(op, a, b, DataType::Interval);
            return Ok((
                self.folded(folded, || Expr::Arith(op, v.boxed(), factor.boxed(), DataType::Interval))?,
                Some(DataType::Interval),
            ));
        }
        Ok((Expr::Arith(op, v.boxed(), factor.boxed(), DataType::Interval), Some(DataType::Interval)))
    }

    /// `~`, `~*`, `!~`, `!~*` (also as `OPERATOR(pg_catalog.~)`); None if `op` is not one.
    pub(super) fn regex_op(
        &mut self,
        left: &ast::Expr,
        op: &ast::BinaryOperator,
        right: &ast::Expr,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<Option<(Expr, Ty)>> {
        use ast::BinaryOperator as B;
        let (negated, case_insensitive) = match op {
            B::StringConcat if is_array_ast(left) || is_array_ast(right) => {
                return self.array_concat(left, right, scope, ctx).map(Some);
            }
            B::PGRegexMatch => (false, false),
            B::PGRegexIMatch => (false, true),
            B::PGRegexNotMatch => (true, false),
            B::PGRegexNotIMatch => (true, true),
            // `^` is power(): the same float8 and numeric versions.
            B::PGExp => return self.scalar_function("power", &[left.clone(), right.clone()], scope, ctx).map(Some),
            B::PGCustomBinaryOperator(parts) => {
                let sym = match parts.as_slice() {
                    [s] => s.as_str(),
                    [schema, s] if schema.eq_ignore_ascii_case("pg_catalog") => s.as_str(),
                    _ => return Err(SqlError::unsupported(format!("operator {op}"))),
                };
                let plain = match sym {
                    "~" => return self.regex_op(left, &B::PGRegexMatch, right, scope, ctx),
                    "~*" => return self.regex_op(left, &B::PGRegexIMatch, right, scope, ctx),
                    "!~" => return self.regex_op(left, &B::PGRegexNotMatch, right, scope, ctx),
                    "!~*" => return self.regex_op(left, &B::PGRegexNotIMatch, right, scope, ctx),
                    "=" => B::Eq,
                    "<>" | "!=" => B::NotEq,
                    "<" => B::Lt,
                    "<=" => B::LtEq,
                    ">" => B::Gt,
                    ">=" => B::GtEq,
                    "~~" => {
                        let e = ast::Expr::Like {
                            negated: false,
                            any: false,
                            expr: Box::new(left.clone()),
                            pattern: Box::new(right.clone()),
                            escape_char: None,
                        };
                        return self.expr(&e, scope, ctx).map(Some);
                    }
                    _ => return Err(SqlError::unsupported(format!("operator {op}"))),
                };
                let e = ast::Expr::BinaryOp { left: Box::new(left.clone()), op: plain, right: Box::new(right.clone()) };
                return self.expr(&e, scope, ctx).map(Some);
            }
            _ => return Ok(None),
        };
        let x = self.expr(left, scope, ctx)?;
        let p = self.expr(right, scope, ctx)?;
        self.regex_match(x, p, negated, case_insensitive).map(Some)
    }

    /// The bound `x ~ p` (its negated and case-insensitive forms) of two
    /// bound operands.
    pub(super) fn regex_match(
        &mut self,
        (x, xt): (Expr, Ty),
        (p, pt): (Expr, Ty),
        negated: bool,
        case_insensitive: bool,
    ) -> Result<(Expr, Ty)> {
        let sym = match (negated, case_insensitive) {
            (false, false) => "~",
            (false, true) => "~*",
            (true, false) => "!~",
            (true, true) => "!~*",
        };
        let x = self.text_arg(x, xt, sym)?;
        let p = self.text_arg(p, pt, sym)?;
        Ok((Expr::Func(Func::Sys(SysFunc::Regex { negated, case_insensitive }), vec![x, p]), Some(DataType::Bool)))
    }

    /// `x COLLATE name`: only the collations that compare as pgtier does.
    pub(super) fn collate(
        &mut self,
        x: &ast::Expr,
        collation: &ObjectName,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        let name = parts(collation)?;
        let last = name.last().map(String::as_str).unwrap_or("");
        let schema_ok = name.len() == 1 || name[0] == "pg_catalog";
        if !(schema_ok && matches!(last, "default" | "C" | "POSIX" | "c" | "posix")) {
            return Err(SqlError::unsupported(format!("COLLATE {collation} (only \"default\", \"C\" and \"POSIX\")")));
        }
        self.expr(x, scope, ctx)
    }
}

/// A timestamp or time plus an untyped literal: PostgreSQL has no
/// timestamp + timestamp, so the literal is an interval.
fn untyped_addend(op: ArithOp, t: DataType) -> DataType {
    match (op, t) {
        (ArithOp::Add, DataType::Timestamp(_) | DataType::TimestampTz(_) | DataType::Time(_)) => DataType::Interval,
        // interval's only * and / take a float8.
        (ArithOp::Mul | ArithOp::Div, DataType::Interval) => DataType::Float8,
        _ => t,
    }
}

/// date/timestamp ± interval is a timestamp; timestamptz ± interval a timestamptz.
fn instant_type(t: DataType) -> DataType {
    if matches!(t, DataType::TimestampTz(_)) { DataType::TimestampTz(None) } else { DataType::Timestamp(None) }
}

/// `tsvector || 'literal'` is tsvector_concat (tsquery's: a query's `|`),
/// not text concatenation; against a typed text it is the text's (anytextcat).
fn refuse_text_search_concat(xt: Ty, yt: Ty) -> Result<()> {
    let ts = |t: Ty| t.is_some_and(value::types::is_text_search);
    if (ts(xt) && (yt.is_none() || ts(yt))) || (ts(yt) && xt.is_none()) {
        return Err(SqlError::unsupported("|| of tsvector or tsquery values"));
    }
    Ok(())
}
