//! A network namespace for one pgtier process, so a test can cut it off
//! the way a network fails: packets dropped, no connection reset.
//!
//! The process reaches the host (PostgreSQL, its standby) over one veth
//! link and is reached by its clients over another; `cut` takes the first
//! link down, so the process keeps its clients and loses everything else,
//! and `heal` brings it back. Needs root (CI runs as root). Each namespace
//! is named after the test process and removed on drop; one a killed test
//! left behind is removed by the next test that makes one.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

const PREFIX: &str = "pgtier-test-";

pub struct Isolated {
    name: String,
    backend_link: String,
    /// The host's address on the backend link (PostgreSQL listens there).
    pub host_address: String,
    /// The process's address on the backend link (its standby connects there).
    pub backend_address: String,
    /// The process's address on the client link.
    pub client_address: String,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip (iproute2)");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

/// Removes namespaces of test processes that no longer run.
fn sweep_abandoned() {
    let out = Command::new("ip").args(["netns", "list"]).output().expect("run ip (iproute2)");
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(name) = line.split_whitespace().next() else { continue };
        let Some(pid) = name.strip_prefix(PREFIX).and_then(|rest| rest.split('-').next()) else { continue };
        if !std::path::Path::new("/proc").join(pid).exists() {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

impl Isolated {
    pub fn new() -> Isolated {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        assert!(root, "this test makes network namespaces and needs root (CI runs as root)");
        sweep_abandoned();
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let name = format!("{PREFIX}{pid}-{n}");
        // Interface names are at most 15 bytes; pids at most 7 digits.
        let link = |kind: char, side: char| format!("pgt{kind}{side}{pid}x{n}");
        let subnet = (pid * 4 + n) % 250;
        let isolated = Isolated {
            name: name.clone(),
            backend_link: link('b', 'h'),
            host_address: format!("10.213.{subnet}.1"),
            backend_address: format!("10.213.{subnet}.2"),
            client_address: format!("10.214.{subnet}.2"),
        };
        ip(&["netns", "add", &name]);
        ip(&["netns", "exec", &name, "ip", "link", "set", "lo", "up"]);
        for (kind, net) in [('b', 213), ('c', 214)] {
            let (host, inside) = (link(kind, 'h'), link(kind, 'n'));
            ip(&["link", "add", &host, "type", "veth", "peer", "name", &inside]);
            ip(&["link", "set", &inside, "netns", &name]);
            ip(&["addr", "add", &format!("10.{net}.{subnet}.1/30"), "dev", &host]);
            ip(&["link", "set", &host, "up"]);
            ip(&["netns", "exec", &name, "ip", "addr", "add", &format!("10.{net}.{subnet}.2/30"), "dev", &inside]);
            ip(&["netns", "exec", &name, "ip", "link", "set", &inside, "up"]);
        }
        isolated
    }

    /// `program` run inside the namespace.
    pub fn command(&self, program: &std::path::Path) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.name]).arg(program);
        command
    }

    /// Drops every packet between the process and the host's backend link.
    pub fn cut(&self) {
        ip(&["link", "set", &self.backend_link, "down"]);
    }

    pub fn heal(&self) {
        ip(&["link", "set", &self.backend_link, "up"]);
    }
}

impl Drop for Isolated {
    fn drop(&mut self) {
        // Deleting the namespace deletes the veth ends in it, and so their peers.
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}
