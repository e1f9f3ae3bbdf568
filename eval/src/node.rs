//! The storage node the evaluator starts for itself: this same binary, run
//! with the `storage-node` subcommand as a process of its own (so that it
//! can be killed with SIGKILL), serving the storage-node library.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, anyhow, bail};
use splitkv_common::tls::NodeIdentity;
use splitkv_common::transport::TransportSettings;
use storage_node::server::{self, ServerConfig};
use storage_node::{Durability, IoEngineKind, StorageConfig};

/// The line the child prints once it serves.
const READY: &str = "SPLITKV-STORAGE-LISTENING ";

/// Options of the `storage-node` subcommand.
#[derive(clap::Args, Debug, Clone)]
pub struct NodeArgs {
    /// Data directory.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// The storage node's certificate directory.
    #[arg(long)]
    pub certs: PathBuf,
    /// UDP address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Partitions of a new data directory.
    #[arg(long, default_value_t = 16)]
    pub partitions: usize,
    /// mmap or sync.
    #[arg(long, default_value = "mmap")]
    pub durability: Durability,
    /// uring or psync.
    #[arg(long, default_value = "uring")]
    pub io_engine: IoEngineKind,
}

/// Body of the `storage-node` subcommand: serves until SIGTERM, then
/// flushes and exits.
pub fn serve(args: NodeArgs) -> Result<()> {
    let mut config = StorageConfig::new(&args.data_dir);
    config.partitions = args.partitions;
    config.durability = args.durability;
    config.io_engine = args.io_engine;
    let identity = NodeIdentity::load(&args.certs)?;
    let mut signal_error = None;
    server::serve_blocking(
        config,
        &identity,
        &ServerConfig {
            listen: args.listen,
            transport: TransportSettings::default(),
            follow_stall_ms: splitkv_common::message::DEFAULT_FOLLOW_STALL_MS,
        },
        Some(2),
        |addr, engine| println!("{READY}{addr} {}", engine.io_engine()),
        async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut term) => {
                    let _ = term.recv().await;
                }
                Err(e) => signal_error = Some(e),
            }
        },
    )?;
    match signal_error {
        Some(e) => Err(e).context("listening for SIGTERM"),
        None => Ok(()),
    }
}

/// A storage node running as a child process.
pub struct ChildNode {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// The I/O engine it reported.
    pub io_engine: String,
}

impl ChildNode {
    /// Starts `eval storage-node` on `data_dir` and waits until it serves.
    pub fn spawn(
        data_dir: &Path,
        certs: &Path,
        listen: SocketAddr,
        partitions: usize,
    ) -> Result<Self> {
        let exe = std::env::current_exe().context("locating the eval binary")?;
        let mut child = Command::new(exe)
            .arg("storage-node")
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--certs")
            .arg(certs)
            .arg("--listen")
            .arg(listen.to_string())
            .arg("--partitions")
            .arg(partitions.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .spawn()
            .context("starting the storage node")?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow!("no stdout from the storage node"))?;
        let mut lines = BufReader::new(stdout).lines();
        for line in lines.by_ref() {
            let line = line?;
            if let Some(rest) = line.strip_prefix(READY) {
                let mut parts = rest.split_whitespace();
                let addr = parts
                    .next()
                    .ok_or_else(|| anyhow!("no address in {line:?}"))?
                    .parse()?;
                let io_engine = parts.next().unwrap_or("unknown").to_string();
                std::thread::spawn(move || for _ in lines {});
                return Ok(Self {
                    child,
                    addr,
                    io_engine,
                });
            }
        }
        let status = child.wait()?;
        bail!("the storage node exited before serving ({status})")
    }

    /// Kills the node with SIGKILL and reaps it.
    pub fn kill9(mut self) -> Result<()> {
        self.child.kill().context("kill -9 of the storage node")?;
        self.child.wait()?;
        Ok(())
    }

    /// Stops the node with SIGTERM (it flushes) and waits for it.
    pub fn stop(mut self) -> Result<()> {
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait()?;
        if !status.success() {
            bail!("the storage node exited with {status}");
        }
        Ok(())
    }
}

impl Drop for ChildNode {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A cluster of the evaluator's own: certificates and a data directory in a
/// temporary directory (kept, if asked), and the storage node serving them.
pub struct OwnCluster {
    /// The storage node.
    pub node: Option<ChildNode>,
    /// The compute node's certificate directory.
    pub compute_certs: PathBuf,
    storage_certs: PathBuf,
    data_dir: PathBuf,
    partitions: usize,
    _temp: Option<tempfile::TempDir>,
}

impl OwnCluster {
    /// Makes certificates and starts a storage node on loopback. With
    /// `keep`, the data directory is `keep` and survives the run.
    pub fn start(keep: Option<&Path>, partitions: usize) -> Result<Self> {
        let temp = tempfile::Builder::new().prefix("splitkv-eval").tempdir()?;
        let certs = temp.path().join("certs");
        splitkv_common::certs::generate_cluster(
            &certs,
            &splitkv_common::certs::DEFAULT_STORAGE_NAMES,
            false,
        )?;
        let data_dir = match keep {
            Some(dir) => dir.to_path_buf(),
            None => temp.path().join("data"),
        };
        let storage_certs = certs.join("storage");
        let node = ChildNode::spawn(
            &data_dir,
            &storage_certs,
            "127.0.0.1:0".parse()?,
            partitions,
        )?;
        Ok(Self {
            node: Some(node),
            compute_certs: certs.join("compute"),
            storage_certs,
            data_dir,
            partitions,
            _temp: Some(temp),
        })
    }

    /// `host:port` of the storage node (the host its certificate names).
    pub fn storage(&self) -> String {
        let port = self.node.as_ref().map_or(0, |n| n.addr.port());
        format!("localhost:{port}")
    }

    /// Kills the storage node with SIGKILL.
    pub fn kill9(&mut self) -> Result<()> {
        match self.node.take() {
            Some(node) => node.kill9(),
            None => Ok(()),
        }
    }

    /// Starts the storage node again on the same port and data directory.
    pub fn restart(&mut self, port: u16) -> Result<()> {
        let listen = SocketAddr::from(([127, 0, 0, 1], port));
        self.node = Some(ChildNode::spawn(
            &self.data_dir,
            &self.storage_certs,
            listen,
            self.partitions,
        )?);
        Ok(())
    }

    /// Stops the storage node cleanly.
    pub fn stop(&mut self) -> Result<()> {
        match self.node.take() {
            Some(node) => node.stop(),
            None => Ok(()),
        }
    }
}
