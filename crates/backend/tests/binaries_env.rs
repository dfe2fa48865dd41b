//! `PGTIER_PG_BIN` as the process sees it. Alone in its own test binary:
//! environment variables are process-global and other tests read them.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;

use pgtier_backend::harness::find_server_binaries;

#[test]
fn pg_bin_env_overrides_the_search() {
    let temp = tempfile::tempdir().unwrap();
    for program in ["initdb", "postgres", "pg_ctl"] {
        let path = temp.path().join(program);
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // SAFETY: this is the only test in this binary, so no other thread reads
    // the environment concurrently.
    unsafe { std::env::set_var("PGTIER_PG_BIN", temp.path()) };
    assert_eq!(find_server_binaries().unwrap(), temp.path());

    let missing = temp.path().join("missing");
    // SAFETY: as above.
    unsafe { std::env::set_var("PGTIER_PG_BIN", &missing) };
    let error = find_server_binaries().unwrap_err().to_string();
    assert!(error.contains("PGTIER_PG_BIN"), "{error}");
    assert!(error.contains("scripts/ensure-postgres.sh"), "{error}");

    // SAFETY: as above.
    unsafe { std::env::remove_var("PGTIER_PG_BIN") };
    assert_ne!(find_server_binaries().unwrap(), temp.path());
}
