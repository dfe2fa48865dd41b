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

impl Exec<'_> {
    /// CREATE [OR REPLACE] TRIGGER: 42710 for an existing name on the
    /// table without OR REPLACE.
    pub fn create_trigger(
        &mut self,
        table: &str,
        name: &str,
        doc: &crate::catalog::triggers::TriggerDoc,
        replace: bool,
    ) -> Result<()> {
        use crate::catalog::triggers::{encode, trigger_table_def, trigger_table_name};
        let def = || trigger_table_def(table, name, doc);
        self.create_stored_doc(table, name, "trigger", &trigger_table_name(table, name), def, || encode(doc), replace)
    }

    /// Gives `table` a new schema version (its annotation written again):
    /// statements planned on it, prepared ones too, re-plan and bind the
    /// triggers it has now.
    fn touch_table(&mut self, table: &str) -> Result<()> {
        if let Some(t) = self.txn.catalog().table_by_name(table).cloned() {
            self.txn.set_annotation(t.id, t.annotation.clone())?;
        }
        Ok(())
    }

    /// DROP TRIGGER [IF EXISTS] name ON table (`table` empty: it does not exist).
    pub fn drop_trigger(&mut self, table: &str, name: &str, if_exists: bool) -> Result<()> {
        let stored = crate::catalog::triggers::trigger_table_name(table, name);
        if !table.is_empty() && self.txn.catalog().table_by_name(&stored).is_some() {
            self.touch_table(table)?;
            self.txn.drop_table(&stored)?;
            return Ok(());
        }
        let relation = crate::names::split(table).1;
        let message = if table.is_empty() {
            format!("trigger \"{name}\" for relation does not exist, skipping")
        } else {
            format!("trigger \"{name}\" for relation \"{relation}\" does not exist")
        };
        if if_exists {
            let message = if message.ends_with("skipping") { message } else { format!("{message}, skipping") };
            self.notices.push(SqlNotice { sqlstate: "00000", message });
            return Ok(());
        }
        Err(SqlError::new("42704", message))
    }

    /// CREATE [OR REPLACE] RULE: 42710 for an existing name on the
    /// relation without OR REPLACE.
    pub fn create_rule(
        &mut self,
        table: &str,
        name: &str,
        doc: &crate::catalog::rules::RuleDoc,
        replace: bool,
    ) -> Result<()> {
        use crate::catalog::rules::{encode, rule_table_def, rule_table_name};
        let def = || rule_table_def(table, name, doc);
        self.create_stored_doc(table, name, "rule", &rule_table_name(table, name), def, || encode(doc), replace)
    }

    /// A trigger or rule (`kind`) is a catalog table named `stored` whose
    /// annotation is its document: created with `def`, or its annotation
    /// replaced by `encoded` under OR REPLACE; 42710 for an existing name
    /// without it.
    #[allow(clippy::too_many_arguments)]
    fn create_stored_doc(
        &mut self,
        table: &str,
        name: &str,
        kind: &str,
        stored: &str,
        def: impl FnOnce() -> Result<pgtier_engine::TableDef>,
        encoded: impl FnOnce() -> Result<String>,
        replace: bool,
    ) -> Result<()> {
        self.touch_table(table)?;
        match self.txn.catalog().table_by_name(stored).cloned() {
            None => {
                self.txn.create_table(&def()?)?;
                Ok(())
            }
            Some(_) if !replace => Err(SqlError::new(
                "42710",
                format!("{kind} \"{name}\" for relation \"{}\" already exists", crate::names::split(table).1),
            )),
            Some(old) => {
                self.txn.set_annotation(old.id, Some(encoded()?))?;
                Ok(())
            }
        }
    }

    /// DROP RULE [IF EXISTS] name ON table (`table` empty: it does not exist).
    pub fn drop_rule(&mut self, table: &str, name: &str, if_exists: bool) -> Result<()> {
        let stored = crate::catalog::rules::rule_table_name(table, name);
        if !table.is_empty() && self.txn.catalog().table_by_name(&stored).is_some() {
            self.touch_table(table)?;
            self.txn.drop_table(&stored)?;
            return Ok(());
        }
        let relation = crate::names::split(table).1;
        if table.is_empty() {
            // PostgreSQL's message when the relation is missing too.
            let message = format!("relation \"{relation}\" does not exist, skipping");
            self.notices.push(SqlNotice { sqlstate: "00000", message });
            return Ok(());
        }
        let message = format!("rule \"{name}\" for relation \"{relation}\" does not exist");
        if if_exists {
            self.notices.push(SqlNotice { sqlstate: "00000", message: format!("{message}, skipping") });
            return Ok(());
        }
        Err(SqlError::new("42704", message))
    }

    /// A dropped relation's rules go with it (PostgreSQL's dependency).
    pub(super) fn drop_rules_of(&mut self, table: &str) -> Result<()> {
        for r in crate::catalog::rules::rules_of(self.txn.catalog(), table) {
            self.txn.drop_table(&r.schema.name)?;
        }
        Ok(())
    }
}
