//! Real client programs (psql, psycopg, pgJDBC, pgx, node-postgres) run as
//! child processes against a server, each printing a transcript.
//!
//! Toolchains and packages come from `scripts/ensure-clients.sh` (into
//! `.pgtier/clients/`); a missing one fails the test with that hint, never
//! skips it. Java and Go programs are compiled once per source change into the
//! cargo target dir (a content hash of the sources is the cache key) and run
//! offline: a test never downloads anything.

use std::collections::hash_map::DefaultHasher;
use std::fs::File;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A client program gets this long against one server before it is killed.
pub const CLIENT_TIMEOUT_MS: u64 = 120_000;
/// Compiling a client (Maven or Go, cold) gets this long.
const BUILD_TIMEOUT_MS: u64 = 600_000;

pub const ENSURE_HINT: &str =
    "run `bash scripts/ensure-clients.sh` (scripts/test.sh does) to install the client toolchains and packages";

/// Where and as whom a client connects.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
    pub dbname: String,
}

impl Endpoint {
    /// A Rust client on the endpoint (for setup and checks beside a program).
    pub fn client(&self) -> postgres::Client {
        let mut config = postgres::Config::new();
        config.host(&self.host).port(self.port).user(&self.user).password(&self.password).dbname(&self.dbname);
        config
            .connect(postgres::NoTls)
            .unwrap_or_else(|error| panic!("connect to {}:{}: {error}", self.host, self.port))
    }

    /// libpq's environment variables, which every client program reads.
    pub fn apply(&self, command: &mut Command) {
        command
            .env("PGHOST", &self.host)
            .env("PGPORT", self.port.to_string())
            .env("PGUSER", &self.user)
            .env("PGPASSWORD", &self.password)
            .env("PGDATABASE", &self.dbname)
            .env_remove("PGSERVICE")
            .env_remove("PGSSLMODE")
            .env_remove("PGOPTIONS")
            .env("PGCONNECT_TIMEOUT", "10");
    }
}

/// What one run of a client printed.
#[derive(Debug)]
pub struct Transcript {
    /// stdout (psql: stdout and stderr interleaved), then a last line `exit: CODE`.
    pub text: String,
    pub stderr: String,
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn drivers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/drivers")
}

pub fn clients_dir() -> PathBuf {
    repo_root().join(".pgtier/clients")
}

/// Build outputs of the client programs, in the cargo target dir.
fn build_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("drivers")
}

/// A program on PATH, or a test failure naming the install script.
pub fn require_program(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(name);
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!("`{name}` is not on PATH: {ENSURE_HINT}");
}

fn require_path(path: &Path, what: &str) {
    assert!(path.exists(), "{what} is missing ({}): {ENSURE_HINT}", path.display());
}

/// psql (or pgbench) from the PostgreSQL the harness runs, so versions match;
/// else from PATH.
pub fn pg_program(name: &str) -> PathBuf {
    if let Ok(bin_dir) = pgtier_backend::find_server_binaries() {
        let candidate = bin_dir.join(name);
        if candidate.is_file() {
            return candidate;
        }
    }
    require_program(name)
}

/// Runs `command` with a deadline; stdout goes to `stdout_file` (stderr too
/// when `merge_stderr`). Returns (exit code, stdout, stderr).
fn run_bounded(mut command: Command, merge_stderr: bool, timeout_ms: u64, what: &str) -> (i32, String, String) {
    let temp = tempfile::tempdir().expect("temp dir for client output");
    let out_path = temp.path().join("stdout");
    let err_path = temp.path().join("stderr");
    let out_file = File::create(&out_path).expect("create stdout file");
    let err_file = if merge_stderr {
        out_file.try_clone().expect("clone stdout file")
    } else {
        File::create(&err_path).expect("create stderr file")
    };
    command.stdin(Stdio::null()).stdout(out_file).stderr(err_file);
    let started = Instant::now();
    let mut child = command.spawn().unwrap_or_else(|error| panic!("cannot start {what}: {error} ({ENSURE_HINT})"));
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for client") {
            break Some(status);
        }
        if started.elapsed() > Duration::from_millis(timeout_ms) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    match status {
        Some(status) => (status.code().unwrap_or(-1), stdout, stderr),
        None => panic!("{what} did not finish within {timeout_ms} ms; output so far:\n{stdout}\n{stderr}"),
    }
}

fn finish(code: i32, stdout: String, stderr: String) -> Transcript {
    let mut text = stdout;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!("exit: {code}\n"));
    Transcript { text, stderr }
}

fn hash_files(files: &[PathBuf]) -> String {
    let mut hasher = DefaultHasher::new();
    for file in files {
        let bytes = std::fs::read(file).unwrap_or_else(|error| panic!("read {}: {error}", file.display()));
        file.file_name().hash(&mut hasher);
        bytes.hash(&mut hasher);
    }
    format!("{:016x}", hasher.finish())
}

/// Runs `build` unless `stamp` already records `key`; then records it. A
/// failed build leaves no stamp, so the next run tries again. Builds of one
/// program are serialized by an exclusive lock on a file beside the stamp:
/// two tests of one program (pgjdbc and pgjdbc_berlin) run in parallel, and
/// without it the second saw no stamp yet and recompiled the classes while
/// the first was already running them ("Could not find or load main class",
/// CI of b6cfdbe).
fn build_once(stamp: &Path, key: &str, build: impl FnOnce()) {
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(stamp.with_extension("lock"))
        .expect("open build lock");
    lock.lock().expect("take build lock");
    if std::fs::read_to_string(stamp).ok().as_deref() == Some(key) {
        return;
    }
    let _ = std::fs::remove_file(stamp);
    build();
    let temp = stamp.with_extension("tmp");
    std::fs::write(&temp, key).expect("write build stamp");
    std::fs::rename(&temp, stamp).expect("install build stamp");
}

fn run_build(command: Command, what: &str) {
    let (code, stdout, stderr) = run_bounded(command, true, BUILD_TIMEOUT_MS, what);
    assert!(code == 0, "{what} failed (exit {code}); {ENSURE_HINT}\n{stdout}{stderr}");
}

/// The five driver programs, and the ORM programs on psycopg.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    Psql,
    Python,
    /// SQLAlchemy 2's ORM on psycopg 3 (python/orm.py, in the same venv).
    SqlAlchemy,
    /// The ORM over cached tables whose keys PostgreSQL generates
    /// (python/orm_keys.py; its node and rounds by [`Client::run_env`]).
    SqlAlchemyKeys,
    /// Django 5.2: `migrate` of its built-in apps, then CRUD through its ORM
    /// (django/crud.py, in the same venv).
    Django,
    Java,
    /// pgJDBC's type paths again, in a JVM whose zone is Europe/Berlin.
    JavaBerlin,
    Go,
    Node,
}

impl Client {
    pub fn name(self) -> &'static str {
        match self {
            Client::Psql => "psql",
            Client::Python => "python",
            Client::SqlAlchemy => "sqlalchemy",
            Client::SqlAlchemyKeys => "sqlalchemy-keys",
            Client::Django => "django",
            Client::Java => "java",
            Client::JavaBerlin => "java-berlin",
            Client::Go => "go",
            Client::Node => "node",
        }
    }

    /// Checks the toolchain and compiles the program if needed (once per
    /// source change). Call before starting servers: it may take minutes cold.
    pub fn prepare(self) {
        match self {
            Client::Psql => {
                pg_program("psql");
            }
            Client::Python => {
                require_path(&python_venv().join("bin/python"), "the Python venv with psycopg");
            }
            Client::SqlAlchemy | Client::SqlAlchemyKeys => {
                let python = python_venv().join("bin/python");
                require_path(&python, "the Python venv with psycopg and SQLAlchemy");
                let mut probe = Command::new(python);
                probe.args(["-c", "import sqlalchemy"]);
                run_build(probe, "import sqlalchemy");
            }
            Client::Django => {
                let python = python_venv().join("bin/python");
                require_path(&python, "the Python venv with psycopg and Django");
                let mut probe = Command::new(python);
                probe.args(["-c", "import django"]);
                run_build(probe, "import django");
            }
            Client::Node => {
                require_program("node");
                require_path(&node_modules().join("pg/package.json"), "node-postgres (npm package pg)");
            }
            Client::Java | Client::JavaBerlin => build_java(),
            Client::Go => build_go(),
        }
    }

    /// Runs the program against `endpoint`.
    pub fn run(self, endpoint: &Endpoint) -> Transcript {
        match self {
            Client::Psql => {
                // Scripts where everything must succeed, then one of expected errors.
                let dir = drivers_dir().join("psql");
                let mut text = String::new();
                let mut stderr = String::new();
                for (script, stop) in
                    [("main.sql", "1"), ("describe.sql", "1"), ("errors.sql", "0"), ("tatp_types.sql", "1")]
                {
                    let mut command = Command::new(pg_program("psql"));
                    command
                        .current_dir(&dir)
                        .args(["-X", "-q", "-v"])
                        .arg(format!("ON_ERROR_STOP={stop}"))
                        .args(["-f", script]);
                    endpoint.apply(&mut command);
                    let (code, out, err) = run_bounded(command, true, CLIENT_TIMEOUT_MS, "psql");
                    text.push_str(&format!("=== {script}\n"));
                    text.push_str(&finish(code, out, String::new()).text);
                    stderr.push_str(&err);
                }
                Transcript { text, stderr }
            }
            Client::Python => {
                let mut command = Command::new(python_venv().join("bin/python"));
                command.arg(drivers_dir().join("python/client.py"));
                self.run_program(command, endpoint)
            }
            Client::SqlAlchemy | Client::SqlAlchemyKeys => self.run_env(endpoint, &[]),
            Client::Django => {
                let mut command = Command::new(python_venv().join("bin/python"));
                command.arg(drivers_dir().join("django/crud.py"));
                self.run_program(command, endpoint)
            }
            Client::Java | Client::JavaBerlin => {
                let out = build_dir().join("java");
                let classpath = std::fs::read_to_string(out.join("classpath.txt")).expect("classpath.txt");
                let mut command = Command::new(require_program("java"));
                let berlin = self == Client::JavaBerlin;
                command
                    .arg(if berlin { "-Duser.timezone=Europe/Berlin" } else { "-Duser.timezone=UTC" })
                    .arg("-XX:TieredStopAtLevel=1")
                    .arg("-cp")
                    .arg(format!("{}:{}", out.join("classes").display(), classpath.trim()))
                    .arg("pgtier.drivers.Client");
                if berlin {
                    command.arg("types");
                }
                self.run_program(command, endpoint)
            }
            Client::Go => {
                let command = Command::new(build_dir().join("go/pgx-client"));
                self.run_program(command, endpoint)
            }
            Client::Node => {
                let mut command = Command::new(require_program("node"));
                command.arg(drivers_dir().join("node/client.js")).env("NODE_PATH", node_modules()).env("TZ", "UTC");
                self.run_program(command, endpoint)
            }
        }
    }

    /// Runs a Python ORM program with extra environment variables.
    pub fn run_env(self, endpoint: &Endpoint, env: &[(&str, &str)]) -> Transcript {
        let program = match self {
            Client::SqlAlchemy => "python/orm.py",
            Client::SqlAlchemyKeys => "python/orm_keys.py",
            other => panic!("{} takes no environment of its own", other.name()),
        };
        let mut command = Command::new(python_venv().join("bin/python"));
        command.arg(drivers_dir().join(program)).envs(env.iter().copied());
        self.run_program(command, endpoint)
    }

    fn run_program(self, mut command: Command, endpoint: &Endpoint) -> Transcript {
        endpoint.apply(&mut command);
        let dir = match self {
            Client::SqlAlchemy | Client::SqlAlchemyKeys => "python",
            Client::JavaBerlin => "java",
            _ => self.name(),
        };
        command.current_dir(drivers_dir().join(dir));
        let (code, stdout, stderr) = run_bounded(command, false, CLIENT_TIMEOUT_MS, self.name());
        finish(code, stdout, stderr)
    }
}

fn python_venv() -> PathBuf {
    clients_dir().join("python")
}

fn node_modules() -> PathBuf {
    clients_dir().join("node/node_modules")
}

/// The program's source files (`*.ext` in `dir`), sorted: each section of
/// a program lives in its own file, and a change to any of them rebuilds it.
fn sources(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("driver program sources")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    files.sort();
    files
}

fn build_java() {
    let mvn = require_program("mvn");
    require_program("java");
    let source = drivers_dir().join("java");
    let out = build_dir().join("java");
    std::fs::create_dir_all(&out).expect("java build dir");
    let mut files = vec![source.join("pom.xml")];
    files.extend(sources(&source.join("src/main/java/pgtier/drivers"), "java"));
    let key = hash_files(&files);
    build_once(&out.join("stamp"), &key, || {
        let mut command = Command::new(mvn);
        command
            .current_dir(&source)
            .args(["-B", "-q", "-o"])
            .arg(format!("-Dmaven.repo.local={}", clients_dir().join("m2").display()))
            .arg(format!("-Dpgtier.build.dir={}", out.display()))
            .arg("compile");
        run_build(command, "mvn -o compile of the pgJDBC client");
    });
}

fn build_go() {
    let go = require_program("go");
    let source = drivers_dir().join("go");
    let out = build_dir().join("go");
    std::fs::create_dir_all(&out).expect("go build dir");
    let mut files = vec![source.join("go.mod"), source.join("go.sum")];
    files.extend(sources(&source, "go"));
    let key = hash_files(&files);
    build_once(&out.join("stamp"), &key, || {
        let mut command = Command::new(go);
        go_env(&mut command);
        command.current_dir(&source).args(["build", "-o"]).arg(out.join("pgx-client")).arg(".");
        run_build(command, "go build of the pgx client");
    });
}

/// The module cache ensure-clients.sh filled; never the network from a test.
fn go_env(command: &mut Command) {
    let go_dir = clients_dir().join("go");
    command
        .env("GOMODCACHE", go_dir.join("mod"))
        .env("GOCACHE", go_dir.join("cache"))
        .env("GOFLAGS", "-modcacherw -mod=readonly")
        .env("GOPROXY", "off")
        .env("GOTOOLCHAIN", "local");
}

/// Asserts two transcripts are equal; on a difference, writes both to the
/// target dir and panics with the differing lines.
pub fn assert_same(client: &str, postgres: &Transcript, pgtier: &Transcript) {
    let dir = build_dir().join("transcripts");
    std::fs::create_dir_all(&dir).expect("transcripts dir");
    let pg_file = dir.join(format!("{client}.postgres.txt"));
    let tier_file = dir.join(format!("{client}.pgtier.txt"));
    std::fs::write(&pg_file, &postgres.text).expect("write transcript");
    std::fs::write(&tier_file, &pgtier.text).expect("write transcript");
    if postgres.text == pgtier.text {
        return;
    }
    let pg_lines: Vec<&str> = postgres.text.lines().collect();
    let tier_lines: Vec<&str> = pgtier.text.lines().collect();
    let mut report = String::new();
    let mut shown = 0;
    for i in 0..pg_lines.len().max(tier_lines.len()) {
        let (a, b) = (pg_lines.get(i).copied(), tier_lines.get(i).copied());
        if a != b && shown < 40 {
            shown += 1;
            report.push_str(&format!(
                "line {}:\n  postgres: {}\n  pgtier:   {}\n",
                i + 1,
                a.unwrap_or("<none>"),
                b.unwrap_or("<none>")
            ));
        }
    }
    panic!(
        "{client}: pgtier's transcript differs from PostgreSQL's ({} vs {} lines); full transcripts: {} and {}\n{report}\npgtier run's stderr:\n{}",
        pg_lines.len(),
        tier_lines.len(),
        pg_file.display(),
        tier_file.display(),
        pgtier.stderr
    );
}

/// Asserts a transcript shows the whole program ran: every line in `expected`
/// occurs (as a substring of some line), none of the failure markers does.
pub fn assert_complete(client: &str, server: &str, transcript: &Transcript, expected: &[&str]) {
    let missing: Vec<&&str> =
        expected.iter().filter(|needle| !transcript.text.lines().any(|line| line.contains(**needle))).collect();
    let failures: Vec<&str> = transcript
        .text
        .lines()
        .filter(|line| line.contains("FAILED") || line.contains("NO ERROR") || line.contains("CONNECTED"))
        .collect();
    assert!(
        missing.is_empty() && failures.is_empty(),
        "{client} against {server}: missing lines {missing:?}, failure lines {failures:?}\ntranscript:\n{}\nstderr:\n{}",
        transcript.text,
        transcript.stderr
    );
}
