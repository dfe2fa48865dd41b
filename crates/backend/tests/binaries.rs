//! Finding the server binaries, with explicit inputs (no environment changes).

#![allow(clippy::unwrap_used)]

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use pgtier_backend::harness::{HarnessError, find_server_binaries, find_server_binaries_from};

fn fake_bin_dir(dir: &Path, programs: &[&str]) {
    std::fs::create_dir_all(dir).unwrap();
    for program in programs {
        let path = dir.join(program);
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

const ALL: [&str; 3] = ["initdb", "postgres", "pg_ctl"];

#[test]
fn override_wins_and_must_be_complete() {
    let temp = tempfile::tempdir().unwrap();
    let good = temp.path().join("good");
    fake_bin_dir(&good, &ALL);
    let empty_root = temp.path().join("no-versions");
    assert_eq!(find_server_binaries_from(Some(&good), None, &empty_root).unwrap(), good);

    let partial = temp.path().join("partial");
    fake_bin_dir(&partial, &["postgres"]);
    // Even with a perfectly good PATH, a wrong override is an error.
    let path = std::env::join_paths([good.as_path()]).unwrap();
    let error = find_server_binaries_from(Some(&partial), Some(&path), &empty_root).unwrap_err();
    assert!(matches!(error, HarnessError::BinariesNotFound { .. }));
    assert!(error.to_string().contains("PGTIER_PG_BIN"), "{error}");
}

#[test]
fn path_symlinks_resolve_to_the_real_directory() {
    let temp = tempfile::tempdir().unwrap();
    let real = temp.path().join("lib/15/bin");
    fake_bin_dir(&real, &ALL);
    let on_path = temp.path().join("local-bin");
    std::fs::create_dir_all(&on_path).unwrap();
    std::os::unix::fs::symlink(real.join("pg_ctl"), on_path.join("pg_ctl")).unwrap();
    let path: OsString = std::env::join_paths([temp.path().join("nothing"), on_path]).unwrap();
    let found = find_server_binaries_from(None, Some(&path), &temp.path().join("none")).unwrap();
    assert_eq!(found, std::fs::canonicalize(&real).unwrap());
}

#[test]
fn newest_version_directory_is_chosen() {
    let temp = tempfile::tempdir().unwrap();
    for version in ["9.6", "15", "13"] {
        fake_bin_dir(&temp.path().join(version).join("bin"), &ALL);
    }
    fake_bin_dir(&temp.path().join("17/bin"), &["postgres"]); // incomplete: skipped
    let found = find_server_binaries_from(None, None, temp.path()).unwrap();
    assert_eq!(found, temp.path().join("15/bin"));
}

#[test]
fn nothing_found_says_how_to_install() {
    let temp = tempfile::tempdir().unwrap();
    let path = std::env::join_paths([temp.path()]).unwrap();
    let error = find_server_binaries_from(None, Some(&path), temp.path()).unwrap_err();
    assert!(error.to_string().contains("run scripts/ensure-postgres.sh (or apt-get install postgresql)"), "{error}");
}

#[test]
fn this_machine_has_server_binaries() {
    let dir = find_server_binaries().unwrap();
    assert!(dir.join("initdb").is_file(), "{}", dir.display());
}
