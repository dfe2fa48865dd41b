//! CREATE [OR REPLACE] FUNCTION and DROP FUNCTION: a function is an
//! engine table without rows (catalog/functions.rs). Only its owner (or a
//! superuser) replaces or drops it (42501).

use pgtier_engine::DataType;

use super::Exec;
use crate::catalog::functions::{
    FunctionDef, UserFunction, encode, function_exact, function_table_def, functions_named,
};
use crate::error::{Result, SqlError, SqlNotice};

impl Exec<'_> {
    fn must_own(&mut self, f: &UserFunction) -> Result<()> {
        let user = crate::catalog::roles::current_role(self.settings).to_owned();
        if f.doc.owner == user || crate::catalog::roles::session_is_superuser(self.txn.catalog(), self.settings)? {
            return Ok(());
        }
        Err(SqlError::new("42501", format!("must be owner of function {}", f.name)))
    }

    pub fn create_function(&mut self, def: &FunctionDef) -> Result<()> {
        let mut doc = def.doc.clone();
        let Some(old) = function_exact(self.txn.catalog(), &def.name, &def.args) else {
            doc.owner = crate::catalog::roles::current_role(self.settings).to_owned();
            self.txn.create_table(&function_table_def(&def.name, &def.args, def.ret, &doc)?)?;
            return Ok(());
        };
        if !def.replace {
            return Err(SqlError::new(
                "42723",
                format!("function {} already exists with same argument types", old.signature()),
            ));
        }
        self.must_own(&old)?;
        if crate::catalog::functions::type_identity(old.ret) != crate::catalog::functions::type_identity(def.ret) {
            return Err(SqlError::new("42P13", "cannot change return type of existing function")
                .with_hint(format!("Use DROP FUNCTION {} first.", old.signature())));
        }
        if let Some((was, _)) =
            old.doc.arg_names.iter().zip(&doc.arg_names).find(|(was, now)| !was.is_empty() && was != now)
        {
            return Err(SqlError::new("42P13", format!("cannot change name of input parameter \"{was}\""))
                .with_hint(format!("Use DROP FUNCTION {} first.", old.signature())));
        }
        doc.owner = old.doc.owner.clone();
        self.txn.set_annotation(old.table.id, Some(encode(&doc)?))?;
        Ok(())
    }

    pub fn drop_functions(&mut self, targets: &[(String, Option<Vec<DataType>>)], if_exists: bool) -> Result<()> {
        let mut found = Vec::new();
        for (name, args) in targets {
            let f = match args {
                Some(args) => function_exact(self.txn.catalog(), name, args).ok_or_else(|| {
                    let types: Vec<&str> = args.iter().map(|t| crate::value::type_name(*t)).collect();
                    format!("function {name}({}) does not exist", types.join(", "))
                }),
                None => {
                    let mut all = functions_named(self.txn.catalog(), name);
                    if all.len() > 1 {
                        return Err(SqlError::new("42725", format!("function name \"{name}\" is not unique"))
                            .with_hint("Specify the argument list to select the function unambiguously."));
                    }
                    all.pop().ok_or_else(|| format!("function {name}() does not exist"))
                }
            };
            match f {
                Ok(f) => {
                    self.must_own(&f)?;
                    found.push(f);
                }
                Err(msg) if if_exists => {
                    self.notices.push(SqlNotice { sqlstate: "00000", message: format!("{msg}, skipping") });
                }
                Err(msg) => {
                    let msg = match args {
                        None => format!("could not find a function named \"{name}\""),
                        Some(_) => msg,
                    };
                    return Err(SqlError::new("42883", msg));
                }
            }
        }
        for f in found {
            if self.txn.catalog().table(f.table.id).is_some() {
                self.txn.drop_table(&f.table.name)?;
            }
        }
        Ok(())
    }
}
