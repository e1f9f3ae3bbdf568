//! The connected clients, as CLIENT LIST, CLIENT INFO and CLIENT KILL see
//! them: one entry per connection, registered while it is open.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use hashbrown::HashMap;
use parking_lot::Mutex;
use tokio::sync::Notify;

/// What a connection shows of itself to CLIENT LIST, and how it is told
/// to close.
#[derive(Debug)]
pub struct ClientEntry {
    /// The client's id (CLIENT ID), unique for the server's lifetime.
    pub id: u64,
    /// The client's address.
    pub addr: SocketAddr,
    /// The server address it connected to.
    pub laddr: SocketAddr,
    /// When it connected.
    pub created: Instant,
    /// What it set with CLIENT SETNAME, HELLO SETNAME and CLIENT SETINFO,
    /// and its protocol and last command.
    pub details: Mutex<ClientDetails>,
    /// Notified once when CLIENT KILL picks it; the connection closes.
    pub killed: Notify,
}

/// The parts of a client's entry that change.
#[derive(Debug, Default, Clone)]
pub struct ClientDetails {
    /// The connection name (empty: none).
    pub name: String,
    /// The client library's name (CLIENT SETINFO LIB-NAME).
    pub lib_name: String,
    /// The client library's version (CLIENT SETINFO LIB-VER).
    pub lib_ver: String,
    /// The protocol version in use (2 or 3).
    pub resp: i64,
    /// The last command run (`parent|sub` for subcommands).
    pub last_command: String,
    /// When the last command ran.
    pub last_active: Option<Instant>,
}

impl ClientEntry {
    /// The client's line in CLIENT LIST and CLIENT INFO, with Redis 7.2's
    /// fields (those SplitKV does not track are 0 or their idle value).
    pub fn describe(&self) -> String {
        let details = self.details.lock().clone();
        let now = Instant::now();
        let age = now.duration_since(self.created).as_secs();
        let idle = details
            .last_active
            .map_or(age, |t| now.duration_since(t).as_secs());
        let command = if details.last_command.is_empty() {
            "NULL"
        } else {
            &details.last_command
        };
        let mut line = String::with_capacity(300);
        let _ = write!(
            line,
            "id={} addr={} laddr={} fd=0 name={} age={age} idle={idle} flags=N db=0 sub=0 \
             psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 \
             obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={command} user=default redir=-1 \
             resp={} lib-name={} lib-ver={}",
            self.id,
            self.addr,
            self.laddr,
            details.name,
            details.resp,
            details.lib_name,
            details.lib_ver,
        );
        line
    }
}

/// Every open connection.
#[derive(Debug, Default)]
pub struct ClientRegistry {
    next_id: AtomicU64,
    clients: Mutex<HashMap<u64, Arc<ClientEntry>>>,
}

impl ClientRegistry {
    /// Registers a new connection; it stays listed until the returned
    /// guard is dropped.
    pub fn register(self: &Arc<Self>, addr: SocketAddr, laddr: SocketAddr) -> Registered {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let entry = Arc::new(ClientEntry {
            id,
            addr,
            laddr,
            created: Instant::now(),
            details: Mutex::new(ClientDetails {
                resp: 2,
                ..ClientDetails::default()
            }),
            killed: Notify::new(),
        });
        self.clients.lock().insert(id, Arc::clone(&entry));
        Registered {
            registry: Arc::clone(self),
            entry,
        }
    }

    /// The open connections, by id.
    pub fn all(&self) -> Vec<Arc<ClientEntry>> {
        let mut all: Vec<_> = self.clients.lock().values().cloned().collect();
        all.sort_by_key(|c| c.id);
        all
    }

    /// Connections registered since start.
    pub fn total_registered(&self) -> u64 {
        self.next_id.load(Ordering::Relaxed)
    }

    /// Connections currently open.
    pub fn len(&self) -> usize {
        self.clients.lock().len()
    }
}

/// A connection's place in the registry, removed on drop.
pub struct Registered {
    registry: Arc<ClientRegistry>,
    /// The connection's entry.
    pub entry: Arc<ClientEntry>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.registry.clients.lock().remove(&self.entry.id);
    }
}
