//! Nodes as processes of their own, for the tests that kill, stop and
//! restart them: `compute-node serve` is the real binary, and the storage
//! node is the test binary re-run in a child mode that serves the
//! storage-node library on a data directory and certificates the parent
//! made (a test calls [`run_storage_child_if_asked`] first).

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

/// Set in the storage child: its data directory.
const CHILD_DATA_ENV: &str = "SPLITKV_TEST_STORAGE_DATA";
/// Set in the storage child: its certificate directory.
const CHILD_CERTS_ENV: &str = "SPLITKV_TEST_STORAGE_CERTS";
/// Set in the storage child: its [`StorageSettings`], space-separated.
const CHILD_SETTINGS_ENV: &str = "SPLITKV_TEST_STORAGE_SETTINGS";
/// The line the storage child prints once it serves, before its port.
const STORAGE_READY: &str = "SPLITKV-TEST-STORAGE ";
/// What the compute node logs once it serves, before its address.
const COMPUTE_LISTEN: &str = "listen=";
/// SIGKILL's number, which `kill -9` sends.
const SIGKILL: i32 = 9;
/// Longest wait for a node to report that it serves.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A child process, killed with SIGKILL (and reaped) when dropped.
pub struct Process {
    child: Child,
    what: &'static str,
}

impl Process {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `kill -9` and reap; panics if the process had ended by itself.
    pub fn kill9(&mut self) {
        self.child
            .kill()
            .unwrap_or_else(|e| panic!("kill -9 of the {}: {e}", self.what));
        let status = self.child.wait().expect("reap");
        assert_eq!(
            status.signal(),
            Some(SIGKILL),
            "the {} ended by itself ({status}) before the kill",
            self.what
        );
    }

    /// Sends `signal` (SIGSTOP, SIGCONT).
    pub fn signal(&self, signal: i32) {
        let pid = libc::pid_t::try_from(self.pid()).expect("a pid");
        // SAFETY: kill(2) on a child this process has not reaped yet.
        let sent = unsafe { libc::kill(pid, signal) };
        assert_eq!(
            sent,
            0,
            "signal {signal} to the {}: {}",
            self.what,
            std::io::Error::last_os_error()
        );
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A field of /proc/PID/status in bytes (`VmRSS:`, `VmHWM:`); `None` once
/// the process is gone.
pub fn status_bytes(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Samples the resident memory of `pids` (their /proc status `field`:
/// `VmRSS:`, or `RssAnon:` for what they allocated themselves) every
/// `interval` until `stop` is set; returns the largest sample of each.
pub fn sample_rss(
    pids: Vec<u32>,
    field: &'static str,
    stop: Arc<AtomicBool>,
    interval: Duration,
) -> std::thread::JoinHandle<Vec<u64>> {
    std::thread::spawn(move || {
        let mut peaks = vec![0; pids.len()];
        while !stop.load(Ordering::Relaxed) {
            for (peak, pid) in peaks.iter_mut().zip(&pids) {
                *peak = (*peak).max(status_bytes(*pid, field).unwrap_or(0));
            }
            std::thread::sleep(interval);
        }
        peaks
    })
}

/// Reads `input` line by line until it ends, echoing each line to stderr if
/// `echo`, and sends what `pick` finds in a line.
pub fn watch_lines(
    input: impl Read + Send + 'static,
    echo: bool,
    pick: impl Fn(&str) -> Option<String> + Send + 'static,
) -> mpsc::Receiver<String> {
    let (found, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(input).lines() {
            let Ok(line) = line else { break };
            if echo {
                eprintln!("{line}");
            }
            if let Some(hit) = pick(&line) {
                let _ = found.send(hit);
            }
        }
    });
    receiver
}

/// The cluster's files: certificates and the storage node's data, removed
/// when dropped.
pub struct Files {
    _dir: tempfile::TempDir,
    pub data: PathBuf,
    pub storage_certs: PathBuf,
    pub compute_certs: PathBuf,
}

impl Files {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let certs = dir.path().join("certs");
        splitkv_common::certs::generate_cluster(
            &certs,
            &splitkv_common::certs::DEFAULT_STORAGE_NAMES,
            false,
        )
        .expect("certificates");
        Self {
            data: dir.path().join("data"),
            storage_certs: certs.join("storage"),
            compute_certs: certs.join("compute"),
            _dir: dir,
        }
    }
}

/// How the storage child is configured.
#[derive(Debug, Clone, Copy)]
pub struct StorageSettings {
    pub partitions: usize,
    /// Each write buffer's size, in bytes.
    pub buffer_bytes: usize,
    /// [`storage_node::server::ServerConfig::follow_stall_ms`].
    pub follow_stall_ms: u64,
    /// The UDP port to serve on; 0 for any free one.
    pub port: u16,
    /// [`storage_node::GcConfig::checkpoint_every_keylog_bytes`].
    pub checkpoint_every_keylog_bytes: u64,
}

impl StorageSettings {
    /// `partitions` partitions, the other settings as the storage node's
    /// defaults.
    pub fn new(partitions: usize) -> Self {
        Self {
            partitions,
            buffer_bytes: storage_node::StorageConfig::new("unused").buffer_bytes,
            follow_stall_ms: splitkv_common::message::DEFAULT_FOLLOW_STALL_MS,
            port: 0,
            checkpoint_every_keylog_bytes: storage_node::GcConfig::default()
                .checkpoint_every_keylog_bytes,
        }
    }

    fn to_env(self) -> String {
        format!(
            "{} {} {} {} {}",
            self.partitions,
            self.buffer_bytes,
            self.follow_stall_ms,
            self.port,
            self.checkpoint_every_keylog_bytes
        )
    }

    fn from_env(text: &str) -> Self {
        let fields: Vec<u64> = text
            .split(' ')
            .map(|n| n.parse().expect("a storage setting"))
            .collect();
        let [
            partitions,
            buffer_bytes,
            follow_stall_ms,
            port,
            checkpoint_every_keylog_bytes,
        ] = fields[..]
        else {
            panic!("storage settings {text:?}");
        };
        Self {
            partitions: partitions as usize,
            buffer_bytes: buffer_bytes as usize,
            follow_stall_ms,
            port: u16::try_from(port).expect("a port"),
            checkpoint_every_keylog_bytes,
        }
    }
}

/// In the storage child (the test binary re-run by [`start_storage`]):
/// serves until killed or until its stdin closes (the parent is gone), then
/// returns true. Elsewhere returns false at once.
pub fn run_storage_child_if_asked() -> bool {
    let (Some(data), Some(certs), Some(settings)) = (
        std::env::var_os(CHILD_DATA_ENV),
        std::env::var_os(CHILD_CERTS_ENV),
        std::env::var(CHILD_SETTINGS_ENV).ok(),
    ) else {
        return false;
    };
    let settings = StorageSettings::from_env(&settings);
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
    let mut config = storage_node::StorageConfig::new(Path::new(&data));
    config.partitions = settings.partitions;
    config.buffer_bytes = settings.buffer_bytes;
    config.gc.checkpoint_every_keylog_bytes = settings.checkpoint_every_keylog_bytes;
    let identity = splitkv_common::tls::NodeIdentity::load(Path::new(&certs))
        .expect("the storage node's certificates");
    let (stop, stopped) = tokio::sync::watch::channel(false);
    std::thread::spawn(move || {
        let mut rest = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut rest);
        let _ = stop.send(true);
    });
    let listen = SocketAddr::from(([127, 0, 0, 1], settings.port));
    // A node killed on this directory a moment ago may hold its lock a
    // little longer (its io_uring workers end after it): the storage node
    // waits for that itself.
    storage_node::server::serve_blocking(
        config,
        &identity,
        &storage_node::server::ServerConfig {
            listen,
            transport: splitkv_common::transport::TransportSettings::default(),
            follow_stall_ms: settings.follow_stall_ms,
        },
        Some(2),
        |addr, _| println!("{STORAGE_READY}{}", addr.port()),
        async move {
            let mut stopped = stopped;
            let _ = stopped.wait_for(|stop| *stop).await;
        },
    )
    .expect("the storage node serves");
    true
}

/// Starts the storage child on `files` by re-running this test binary for
/// `test_name` alone (whose first step is [`run_storage_child_if_asked`]);
/// returns it and its port once it serves. Its stderr lines go to
/// `on_stderr` as well as to this process's stderr.
pub fn start_storage(
    test_name: &str,
    files: &Files,
    settings: StorageSettings,
    on_stderr: impl Fn(&str) -> Option<String> + Send + 'static,
) -> (Process, u16, mpsc::Receiver<String>) {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", test_name, "--nocapture"])
        .env(CHILD_DATA_ENV, &files.data)
        .env(CHILD_CERTS_ENV, &files.storage_certs)
        .env(CHILD_SETTINGS_ENV, settings.to_env())
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the storage node");
    let stdout = child.stdout.take().expect("storage stdout");
    let mut stderr = child.stderr.take().expect("storage stderr");
    let process = Process {
        child,
        what: "storage node",
    };
    let port = match watch_lines(stdout, false, |line| {
        line.strip_prefix(STORAGE_READY).map(str::to_string)
    })
    .recv_timeout(START_TIMEOUT)
    {
        Ok(port) => port.parse().expect("port"),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The child closed its stdout without serving: it failed, and
            // its stderr says why.
            let mut said = String::new();
            let _ = stderr.read_to_string(&mut said);
            panic!("the storage node did not serve:\n{said}");
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("the storage node did not report that it serves within {START_TIMEOUT:?}")
        }
    };
    let found = watch_lines(stderr, true, on_stderr);
    (process, port, found)
}

/// Starts `compute-node serve` with `extra_args` in front of the storage
/// node on `storage_port`; returns it and its Redis-protocol address once
/// it serves.
pub fn start_compute(
    what: &'static str,
    storage_port: u16,
    certs: &Path,
    extra_args: &[&str],
    rust_log: &str,
) -> (Process, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_compute-node"))
        .arg("serve")
        .args(["--storage", &format!("localhost:{storage_port}")])
        .arg("--certs")
        .arg(certs)
        .args(["--listen", "127.0.0.1:0"])
        .args(extra_args)
        .env("RUST_LOG", rust_log)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn the {what}: {e}"));
    let stderr = child.stderr.take().expect("compute stderr");
    let process = Process { child, what };
    let addr = watch_lines(stderr, true, |line| {
        let (_, rest) = line.split_once(COMPUTE_LISTEN)?;
        rest.split_whitespace().next().map(str::to_string)
    })
    .recv_timeout(START_TIMEOUT)
    .unwrap_or_else(|_| panic!("the {what} reports its address"))
    .parse()
    .expect("RESP address");
    (process, addr)
}
