//! The crate's shape, checked from its source text: the layers the README
//! describes (each module importing only from below it) and the bound on
//! function length. Both fail on the first change that breaks them, with
//! the file and line to look at.
//!
//! Imports are read from the text, not from rustc: every `crate::a::b`
//! path and every `use super::...` outside comments and `#[cfg(test)]`
//! modules (a unit test may drive its module from above, e.g. through a
//! `Connection`). That is all the crate uses to name its own items (there
//! is no glob re-export that would hide one), so the reading is complete.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The crate's top-level modules, bottom to top. A module may use the
/// modules of the layers below it and those before it in its own layer;
/// `expr` and `plan` use each other (a bound expression holds subquery
/// plans, a plan holds expressions), as DataFusion's expr crate does.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "ground",
        &["names", "error", "tz", "clock", "depth", "dialect", "parse_window", "parse_sort", "parse", "plpgsql"],
    ),
    ("values", &["value"]),
    ("settings", &["settings"]),
    ("catalog", &["catalog"]),
    ("expressions and plans", &["expr", "plan"]),
    ("planning, execution, explain", &["planner", "explain", "exec"]),
    ("binding", &["bind"]),
    ("sessions", &["session", "cache_predicate"]),
];

/// Pairs of modules of one layer that may use each other.
const MUTUAL: &[(&str, &str)] = &[("expr", "plan")];

/// Longest function, in lines as rustfmt lays it out (rustfmt.toml).
const MAX_FUNCTION_LINES: usize = 120;

struct Source {
    /// Path relative to src/, e.g. `bind/select.rs`.
    file: String,
    /// Module path, e.g. `["bind", "select"]`; empty for lib.rs.
    module: Vec<String>,
    text: String,
}

fn sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    collect(&root, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let file = path.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
            let mut module: Vec<String> = file.trim_end_matches(".rs").split('/').map(str::to_owned).collect();
            if module.last().is_some_and(|m| m == "mod" || m == "lib") {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            Source { file, module, text }
        })
        .collect()
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file that counts for imports: comments dropped, and
/// nothing from the first `#[cfg(test)]` on (unit tests close each file).
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        out.push((i + 1, line.to_owned()));
    }
    out
}

/// The top-level module each crate-relative path in `line` names, given
/// the module `from` the line is in: `crate::x...` and `super::...`
/// (resolved from `from`).
fn named_top_modules(from: &[String], line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = line.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut at = 0;
    while let Some(found) = line[at..].find("crate::") {
        let start = at + found;
        at = start + "crate::".len();
        if start > 0 && (is_ident(bytes[start - 1]) || bytes[start - 1] == b'$') {
            continue; // `$crate::` or part of a longer name
        }
        let name: String = line[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if !name.is_empty() {
            out.push(name);
        }
    }
    let mut at = 0;
    while let Some(found) = line[at..].find("super::") {
        let start = at + found;
        if start > 0 && (is_ident(bytes[start - 1]) || bytes[start - 1] == b':') {
            at = start + 1;
            continue; // the second `super::` of `super::super::`, counted with the first
        }
        let mut rest = &line[start..];
        // A file `a/b.rs` is module a::b, whose `super` is `a`; `a/mod.rs`
        // is module `a`, whose `super` is the crate.
        let mut module: Vec<String> = from.to_vec();
        while let Some(r) = rest.strip_prefix("super::") {
            module.pop();
            rest = r;
        }
        at = start + (line[start..].len() - rest.len());
        if let Some(top) = module.first() {
            out.push(top.clone());
        } else {
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

/// (layer index, position in the layer) of every top-level module.
fn ranks() -> BTreeMap<&'static str, (usize, usize)> {
    let mut ranks = BTreeMap::new();
    for (layer, (_, modules)) in LAYERS.iter().enumerate() {
        for (position, module) in modules.iter().enumerate() {
            assert!(ranks.insert(*module, (layer, position)).is_none(), "{module} is listed twice");
        }
    }
    ranks
}

/// Every import of the crate's own modules that goes up or sideways, as
/// `file:line: a uses b`.
fn upward_imports(sources: &[Source]) -> Vec<String> {
    let ranks = ranks();
    let mut problems = Vec::new();
    for source in sources {
        let Some(top) = source.module.first() else { continue }; // lib.rs re-exports the API
        let Some(&(layer, position)) = ranks.get(top.as_str()) else {
            problems.push(format!("{}: module `{top}` is in no layer (add it to LAYERS and the README)", source.file));
            continue;
        };
        for (line_number, line) in code_lines(&source.text) {
            for used in named_top_modules(&source.module, &line) {
                if used == *top {
                    continue;
                }
                let Some(&(used_layer, used_position)) = ranks.get(used.as_str()) else {
                    continue; // an item of lib.rs (Result, SqlError re-exported) or not a module
                };
                let below = used_layer < layer || (used_layer == layer && used_position < position);
                let mutual = MUTUAL
                    .iter()
                    .any(|&(a, b)| (a, b) == (top.as_str(), used.as_str()) || (b, a) == (top.as_str(), used.as_str()));
                if !below && !mutual {
                    problems.push(format!(
                        "{}:{line_number}: `{top}` ({}) uses `{used}` ({}), which is not below it: {}",
                        source.file,
                        LAYERS[layer].0,
                        LAYERS[used_layer].0,
                        line.trim()
                    ));
                }
            }
        }
    }
    problems
}

#[test]
fn every_module_imports_only_from_below() {
    let sources = sources();
    assert!(sources.len() > 50, "read {} files: wrong directory?", sources.len());
    let problems = upward_imports(&sources);
    assert!(problems.is_empty(), "imports against the layers (crates/sql/README.md):\n{}", problems.join("\n"));
}

/// The checker itself: an upward import planted in a copy of a real file
/// is caught, and a downward one is not.
#[test]
fn the_layer_check_catches_an_upward_import() {
    let mut sources = sources();
    let value = sources.iter_mut().find(|s| s.file == "value/mod.rs").unwrap();
    value.text = format!("use crate::catalog::SystemRel;\nuse crate::error::SqlError;\n{}", value.text);
    let problems = upward_imports(&sources);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with("value/mod.rs:1: `value` (values) uses `catalog` (catalog)"), "{}", problems[0]);
    let bind = sources.iter_mut().find(|s| s.file == "bind/select.rs").unwrap();
    bind.text = format!("use super::super::session::Connection;\n{}", bind.text);
    assert_eq!(upward_imports(&sources).len(), 2);
}

/// The files README.md's "Files" table names: rows `| \`folder/\` |
/// \`a.rs\`, ... |`, where a \`sub/\`: entry starts the files of a
/// subfolder.
fn files_in_readme() -> Vec<String> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let section = readme.split("\n## Files\n").nth(1).expect("README.md has a Files section");
    let section = section.split("\n## ").next().unwrap();
    let mut files = Vec::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let folder = cells[1].trim_matches('`').trim_start_matches("src/");
        let mut prefix = folder.to_owned();
        for entry in cells[2].split(',') {
            let entry = entry.trim();
            let (sub, name) = match entry.split_once(": ") {
                Some((sub, name)) => (Some(sub.trim_matches('`')), name),
                None => (None, entry),
            };
            if let Some(sub) = sub {
                prefix = format!("{folder}{sub}");
            }
            files.push(format!("{prefix}{}", name.trim_matches('`')));
        }
    }
    files.sort();
    files
}

#[test]
fn the_readme_names_every_file() {
    let mut on_disk: Vec<String> = sources().into_iter().map(|s| s.file).collect();
    on_disk.sort();
    let listed = files_in_readme();
    let missing: Vec<&String> = on_disk.iter().filter(|f| !listed.contains(f)).collect();
    let extra: Vec<&String> = listed.iter().filter(|f| !on_disk.contains(f)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "README.md's Files table: missing {missing:?}, names files that do not exist {extra:?}"
    );
}

/// Functions as rustfmt lays them out: from the `fn` line to the closing
/// brace at the same indentation.
fn long_functions(source: &Source) -> Vec<(usize, String, usize)> {
    let lines: Vec<&str> = source.text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let signature = trimmed
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub(super) ")
            .trim_start_matches("pub ")
            .trim_start_matches("const ")
            .trim_start_matches("unsafe ");
        let Some(rest) = signature.strip_prefix("fn ") else { continue };
        if line.trim_end().ends_with(';') || line.trim_end().ends_with('}') {
            continue;
        }
        let closing = format!("{indent}}}");
        let Some(end) = lines[i..].iter().position(|l| *l == closing) else { continue };
        let length = end + 1;
        if length > MAX_FUNCTION_LINES {
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            out.push((i + 1, name, length));
        }
    }
    out
}

#[test]
fn no_function_is_over_the_length_bound() {
    let mut problems = Vec::new();
    for source in sources() {
        for (line, name, length) in long_functions(&source) {
            problems.push(format!("{}:{line}: fn {name} is {length} lines", source.file));
        }
    }
    assert!(
        problems.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines (split them along their phases or cases):\n{}",
        problems.join("\n")
    );
}
