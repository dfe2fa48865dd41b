//! The process-wide shared cluster outlives the thread that first asked for
//! it, and is gone (server and directory) once the process exits.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pgtier_backend::connect::connect;
use pgtier_backend::harness::shared_cluster;

fn is_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

#[test]
fn survives_the_thread_that_asked_first() {
    let (pid, url) = std::thread::spawn(|| {
        let cluster = shared_cluster().unwrap();
        (cluster.postmaster_pid(), cluster.url())
    })
    .join()
    .unwrap();
    // Had that short-lived thread spawned the server, its exit would have
    // fired the parent-death signal by now.
    std::thread::sleep(Duration::from_millis(300));
    assert!(is_alive(pid), "shared server died with the first caller's thread");
    let one: i32 = connect(&url).unwrap().query_one("SELECT 1", &[]).unwrap().get(0);
    assert_eq!(one, 1);
    assert_eq!(shared_cluster().unwrap().postmaster_pid(), pid);
    let db_url = shared_cluster().unwrap().create_database("isolated_test_db").unwrap();
    connect(&db_url).unwrap();
}

const EXIT_CHILD_ENV: &str = "PGTIER_BACKEND_TEST_SHARED_EXIT_CHILD";

#[test]
#[ignore = "helper process for stopped_and_removed_at_exit"]
fn shared_exit_helper() {
    if std::env::var_os(EXIT_CHILD_ENV).is_none() {
        return;
    }
    let cluster = shared_cluster().unwrap();
    // libtest prints "test name ... " without a newline first; start a fresh line.
    println!();
    println!("POSTMASTER_PID={}", cluster.postmaster_pid());
    println!("DATA_DIR={}", cluster.data_dir().display());
}

#[test]
fn stopped_and_removed_at_exit() {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["shared_exit_helper", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(EXIT_CHILD_ENV, "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let exited = Instant::now();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "helper failed: {stdout}{}", String::from_utf8_lossy(&output.stderr));
    let pid: u32 = stdout
        .lines()
        .find_map(|line| line.split_once("POSTMASTER_PID=").map(|(_, value)| value))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let data_dir =
        PathBuf::from(stdout.lines().find_map(|line| line.split_once("DATA_DIR=").map(|(_, value)| value)).unwrap());
    while is_alive(pid) && exited.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let alive = is_alive(pid);
    if alive {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    }
    assert!(!alive, "shared server {pid} outlived its process");
    assert!(!data_dir.exists(), "{} left behind at exit", data_dir.display());
}
