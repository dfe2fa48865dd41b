//! The cache-group statement parser: what it claims, what it leaves to
//! sqlparser, and where predicates end.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use pgtier_cache::{Aging, CacheError, CacheStatement, CreateGroup, GroupKind, parse_cache_statement};

fn parse(sql: &str) -> CacheStatement {
    match parse_cache_statement(sql) {
        Some(Ok(statement)) => statement,
        other => panic!("{sql}: {other:?}"),
    }
}

fn create(sql: &str) -> CreateGroup {
    match parse(sql) {
        CacheStatement::Create(create) => create,
        other => panic!("{sql}: {other:?}"),
    }
}

fn error(sql: &str) -> CacheError {
    match parse_cache_statement(sql) {
        Some(Err(error)) => error,
        other => panic!("{sql}: expected an error, got {other:?}"),
    }
}

#[test]
fn other_statements_fall_through() {
    for sql in [
        "CREATE TABLE t (a int)",
        "create index on t (a)",
        "LOAD 'auto_explain'",
        "DROP TABLE cache",
        "REFRESH MATERIALIZED VIEW v",
        "SELECT 'CREATE READONLY CACHE GROUP g FROM t'",
        "-- LOAD CACHE GROUP g\nSELECT 1",
        "",
        "  ;  ",
        "UNLOAD ('select 1') TO 's3://x'",
    ] {
        assert!(parse_cache_statement(sql).is_none(), "{sql}");
    }
}

#[test]
fn create_with_everything() {
    let c = create(
        "create dynamic AWT cache group \"Tatp\" from Public.Subscriber where s_id <= 100 and sub_nbr <> ',aging' , access_info, \"Special Facility\" AGING USE last_seen LIFETIME 3 hours KEEP MEMORY '64MB';",
    );
    assert_eq!(c.name, "Tatp");
    assert_eq!(c.kind, GroupKind::Awt);
    assert!(c.dynamic && c.keep);
    assert_eq!(c.root, "public.subscriber");
    assert_eq!(c.root_predicate.as_deref(), Some("s_id <= 100 and sub_nbr <> ',aging'"));
    assert_eq!(c.children, vec!["access_info".to_owned(), "\"Special Facility\"".to_owned()]);
    assert_eq!(c.aging, Aging::Time { column: "last_seen".into(), lifetime: Duration::from_secs(3 * 3600) });
    assert_eq!(c.memory_budget, Some(64 << 20));
}

#[test]
fn create_defaults_follow_dynamic() {
    let plain = create("CREATE READONLY CACHE GROUP g FROM t");
    assert_eq!(
        (plain.kind, plain.dynamic, plain.aging.clone(), plain.keep),
        (GroupKind::ReadOnly, false, Aging::Off, false)
    );
    assert!(plain.root_predicate.is_none() && plain.children.is_empty() && plain.memory_budget.is_none());
    let dynamic = create("CREATE DYNAMIC SWT CACHE GROUP g FROM t");
    assert_eq!((dynamic.kind, dynamic.aging), (GroupKind::Swt, Aging::Lru));
    assert_eq!(create("CREATE DYNAMIC READONLY CACHE GROUP g FROM t AGING OFF").aging, Aging::Off);
    assert_eq!(create("CREATE READONLY CACHE GROUP g FROM t AGING LRU").aging, Aging::Lru);
    assert_eq!(create("CREATE READONLY CACHE GROUP g FROM t MEMORY '1GiB' KEEP").memory_budget, Some(1 << 30));
}

#[test]
fn autorefresh_is_on_for_readonly_groups_unless_turned_off() {
    assert!(create("CREATE READONLY CACHE GROUP g FROM t").autorefresh);
    assert!(!create("CREATE AWT CACHE GROUP g FROM t").autorefresh);
    let off = create("CREATE READONLY CACHE GROUP g FROM t WHERE a > 1 AUTOREFRESH OFF KEEP");
    assert!(!off.autorefresh && off.keep);
    assert_eq!(off.root_predicate.as_deref(), Some("a > 1"));
    assert!(create("CREATE DYNAMIC READONLY CACHE GROUP g FROM t AUTOREFRESH ON").autorefresh);
    for bad in [
        "CREATE AWT CACHE GROUP g FROM t AUTOREFRESH OFF",
        "CREATE READONLY CACHE GROUP g FROM t AUTOREFRESH maybe",
        "CREATE READONLY CACHE GROUP g FROM t AUTOREFRESH OFF AUTOREFRESH ON",
    ] {
        let error = pgtier_cache::parse_cache_statement(bad).unwrap().unwrap_err();
        assert_eq!(error.sqlstate(), "42601", "{bad}: {error}");
    }
}

#[test]
fn predicates_end_only_at_top_level_boundaries() {
    let cases = [
        // A comma inside parentheses, a function call, strings of every kind.
        ("s_id IN (1, 2, 3)", "s_id IN (1, 2, 3)"),
        ("f(a, (b, c)) > 0", "f(a, (b, c)) > 0"),
        ("name = 'it''s, aging'", "name = 'it''s, aging'"),
        (r"name = E'a\', keep'", r"name = E'a\', keep'"),
        ("name = $$x, memory 'y'$$", "name = $$x, memory 'y'$$"),
        ("name = $tag$ $$, $tag$", "name = $tag$ $$, $tag$"),
        ("\"Keep\" = 1", "\"Keep\" = 1"),
        ("a /* , keep */ = 1", "a /* , keep */ = 1"),
        ("a = 1 -- , keep\n  and b = 2", "a = 1 -- , keep\n  and b = 2"),
    ];
    for (predicate, expected) in cases {
        let sql = format!("CREATE READONLY CACHE GROUP g FROM root WHERE {predicate}, child KEEP");
        let c = create(&sql);
        assert_eq!(c.root_predicate.as_deref(), Some(expected), "{sql}");
        assert_eq!(c.children, vec!["child".to_owned()], "{sql}");
        assert!(c.keep, "{sql}");
    }
    // An option keyword right after the predicate ends it.
    let c = create("CREATE READONLY CACHE GROUP g FROM root WHERE (a) > 1 AGING LRU");
    assert_eq!((c.root_predicate.as_deref(), c.aging), (Some("(a) > 1"), Aging::Lru));
}

#[test]
fn load_refresh_unload_drop() {
    assert_eq!(
        parse("LOAD CACHE GROUP g WHERE s_id <= 10 AND note <> 'PARALLEL 3' PARALLEL 4;"),
        CacheStatement::Load {
            name: "g".into(),
            predicate: Some("s_id <= 10 AND note <> 'PARALLEL 3'".into()),
            parallel: Some(4)
        }
    );
    assert_eq!(parse("load cache group G"), CacheStatement::Load { name: "g".into(), predicate: None, parallel: None });
    assert_eq!(
        parse("LOAD CACHE GROUP g PARALLEL 2"),
        CacheStatement::Load { name: "g".into(), predicate: None, parallel: Some(2) }
    );
    // `parallel` as a column inside the predicate, not at its end.
    assert_eq!(
        parse("REFRESH CACHE GROUP g WHERE parallel > 3 and x = 1"),
        CacheStatement::Refresh { name: "g".into(), predicate: Some("parallel > 3 and x = 1".into()), parallel: None }
    );
    assert_eq!(
        parse("REFRESH CACHE GROUP g WHERE f(parallel, 4) PARALLEL 8"),
        CacheStatement::Refresh { name: "g".into(), predicate: Some("f(parallel, 4)".into()), parallel: Some(8) }
    );
    assert_eq!(
        parse("UNLOAD CACHE GROUP g WHERE a = 'x;y'"),
        CacheStatement::Unload { name: "g".into(), predicate: Some("a = 'x;y'".into()) }
    );
    assert_eq!(
        parse("/* c */ DROP /* c */ CACHE GROUP IF EXISTS \"G\" ; -- done"),
        CacheStatement::Drop { name: "G".into(), if_exists: true }
    );
    assert_eq!(parse("drop cache group g"), CacheStatement::Drop { name: "g".into(), if_exists: false });
    assert_eq!(parse("LOAD CACHE GROUP g").command(), "LOAD CACHE GROUP");
}

#[test]
fn malformed_statements_are_syntax_errors() {
    for sql in [
        "CREATE READONLY CACHE GROUP g",
        "CREATE READONLY CACHE g FROM t",
        "CREATE CACHE GROUP g FROM t",
        "CREATE READONLY CACHE GROUP g FROM t WHERE",
        "CREATE READONLY CACHE GROUP g FROM t WHERE (a = 1",
        "CREATE READONLY CACHE GROUP g FROM t WHERE a = 1)",
        "CREATE READONLY CACHE GROUP g FROM t AGING SOMETIMES",
        "CREATE READONLY CACHE GROUP g FROM t AGING USE c LIFETIME 3 WEEKS",
        "CREATE READONLY CACHE GROUP g FROM t MEMORY '64 parsecs'",
        "CREATE READONLY CACHE GROUP g FROM t MEMORY 64",
        "CREATE READONLY CACHE GROUP g FROM t KEEP KEEP",
        "CREATE READONLY CACHE GROUP g FROM t junk",
        "LOAD CACHE GROUP",
        "LOAD CACHE GROUP g PARALLEL 0",
        "LOAD CACHE GROUP g junk",
        "LOAD CACHE g",
        "LOAD CACHE GROUP g WHERE a = 'unterminated",
        "DROP CACHE GROUP IF g",
        "UNLOAD CACHE GROUP g; SELECT 1",
        "UNLOAD CACHE GROUP g WHERE a = 1 PARALLEL 2",
    ] {
        let e = error(sql);
        assert!(matches!(e, CacheError::Syntax { .. }), "{sql}: {e:?}");
        assert_eq!(e.sqlstate(), "42601", "{sql}");
    }
    assert!(error("LOAD CACHE GROUP g junk").to_string().contains("\"junk\""));
}

#[test]
fn a_predicate_on_a_child_is_refused() {
    let e = error("CREATE READONLY CACHE GROUP g FROM root, child WHERE x = 1");
    assert!(matches!(&e, CacheError::PredicateNotOnRoot { table } if table == "child"), "{e:?}");
    assert_eq!(e.sqlstate(), "42P17");
    assert!(e.hint().is_some());
}

#[test]
fn memory_sizes_use_postgres_units() {
    for (text, bytes) in [
        ("64MB", 64u64 << 20),
        ("500kB", 500 << 10),
        ("1GiB", 1 << 30),
        ("2TB", 2 << 40),
        ("1024", 1024),
        ("7B", 7),
        ("3 GB", 3 << 30),
    ] {
        assert_eq!(CreateGroup::parse_memory_size(text), Ok(bytes), "{text}");
    }
    for text in ["", "MB", "-1MB", "1.5GB", "1PB", "99999999999TB"] {
        assert!(CreateGroup::parse_memory_size(text).is_err(), "{text}");
    }
}

#[test]
fn statements_split_at_top_level_semicolons() {
    assert_eq!(
        CacheStatement::split_statements("SELECT ';'; LOAD CACHE GROUP g WHERE x = $$;$$ ; -- c;\n /* ; */"),
        vec!["SELECT ';'", "LOAD CACHE GROUP g WHERE x = $$;$$"]
    );
    assert_eq!(CacheStatement::split_statements(" ; ; "), Vec::<&str>::new());
}

#[test]
fn flash_policies_and_tier_commands() {
    use pgtier_cache::{FlashPolicy, TierCommand};
    assert_eq!(create("CREATE DYNAMIC AWT CACHE GROUP g FROM t").flash, FlashPolicy::Default);
    assert_eq!(create("CREATE DYNAMIC AWT CACHE GROUP g FROM t FLASH keep").flash, FlashPolicy::Keep);
    assert_eq!(create("CREATE DYNAMIC SWT CACHE GROUP g FROM t AGING LRU FLASH NONE KEEP").flash, FlashPolicy::None);
    assert_eq!(create("CREATE DYNAMIC SWT CACHE GROUP g FROM t FLASH DEFAULT").flash, FlashPolicy::Default);
    for (sql, expected) in [
        ("CREATE DYNAMIC AWT CACHE GROUP g FROM t FLASH", "KEEP, NONE or DEFAULT"),
        ("CREATE DYNAMIC AWT CACHE GROUP g FROM t FLASH always", "KEEP, NONE or DEFAULT"),
        ("CREATE DYNAMIC AWT CACHE GROUP g FROM t FLASH KEEP FLASH NONE", "more than once"),
        ("ALTER CACHE TIER", "ENABLE, DISABLE or RESIZE"),
        ("ALTER CACHE TIER RESIZE", "quoted size"),
        ("ALTER CACHE TIER RESIZE 'lots'", "size"),
        ("ALTER CACHE TIER ENABLE now", "unexpected text"),
    ] {
        let error = error(sql);
        assert_eq!(error.sqlstate(), "42601", "{sql}");
        assert!(error.to_string().contains(expected), "{sql}: {error}");
    }
    assert_eq!(parse("alter cache tier enable;"), CacheStatement::Tier(TierCommand::Enable));
    assert_eq!(parse("ALTER CACHE TIER DISABLE"), CacheStatement::Tier(TierCommand::Disable));
    assert_eq!(parse("ALTER CACHE TIER RESIZE '2GB'"), CacheStatement::Tier(TierCommand::Resize(2 << 30)));
    assert_eq!(parse("ALTER CACHE TIER RESIZE '2GB'").command(), "ALTER CACHE TIER");
}
