//! One private cluster per process, for test binaries whose tests share a
//! server (each test then creates its own database).
//!
//! A cluster in a static outlives the test thread that first asked for it,
//! and the parent-death signal fires when the *spawning thread* exits. So the
//! shared cluster is started by a keeper thread that never exits: the server
//! lives exactly as long as the process. At normal exit an `atexit` hook stops
//! it and removes its directory; if the process is killed, the parent-death
//! signal stops it and a later process sweeps the directory.

use std::sync::OnceLock;
use std::sync::mpsc;

use crate::error::HarnessError;
use crate::harness::{ClusterOptions, PrivateCluster};

static SHARED: OnceLock<Result<PrivateCluster, String>> = OnceLock::new();

/// The process-wide private cluster (default options: no fsync, trust auth),
/// started on first use. Give each test its own database with
/// [`PrivateCluster::create_database`] rather than sharing tables.
pub fn shared_cluster() -> Result<&'static PrivateCluster, HarnessError> {
    let slot = SHARED.get_or_init(|| start_on_keeper_thread().map_err(|error| error.to_string()));
    match slot {
        Ok(cluster) => Ok(cluster),
        Err(message) => Err(HarnessError::SharedClusterFailed(message.clone())),
    }
}

fn start_on_keeper_thread() -> Result<PrivateCluster, HarnessError> {
    let (sender, receiver) = mpsc::channel();
    std::thread::Builder::new()
        .name("pgtier-shared-cluster".to_owned())
        .spawn(move || {
            let started = PrivateCluster::start(ClusterOptions::default());
            let succeeded = started.is_ok();
            if sender.send(started).is_err() || !succeeded {
                return;
            }
            // Exiting would fire the server's parent-death signal.
            loop {
                std::thread::park();
            }
        })
        .map_err(|error| HarnessError::io("spawn the keeper thread for", "the shared cluster", error))?;
    let cluster = receiver
        .recv()
        .map_err(|_| HarnessError::SharedClusterFailed("the keeper thread died while starting it".to_owned()))??;
    // SAFETY: registering a plain extern "C" function with atexit.
    unsafe { libc::atexit(stop_shared_at_exit) };
    Ok(cluster)
}

extern "C" fn stop_shared_at_exit() {
    // Unwinding out of an extern "C" function aborts; a failed cleanup must not.
    let _ = std::panic::catch_unwind(|| {
        if let Some(Ok(cluster)) = SHARED.get() {
            cluster.stop_in_place();
        }
    });
}
