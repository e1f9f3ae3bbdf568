//! The text of the INFO command: Redis's sections (server, clients,
//! memory, persistence, stats, replication, keyspace) with the fields
//! clients read, and SplitKV's own (index, windows, storage links), laid
//! out as Redis lays them out.

use std::fmt::Write as _;

use splitkv_common::message::StatsReport;

use crate::{Engine, Replication};

/// Splits the storage node's `host:port` as ROLE and INFO show a master's.
pub(crate) fn storage_host_port(storage: &str) -> (&str, i64) {
    match storage.rsplit_once(':') {
        Some((host, port)) => (
            host.trim_start_matches('[').trim_end_matches(']'),
            port.parse().unwrap_or(0),
        ),
        None => (storage, 0),
    }
}

/// The sections, in the order INFO gives them.
const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "keyspace",
    "splitkv",
];

/// What INFO shows about the server besides the engine's figures.
#[derive(Debug)]
pub struct ServerFacts<'a> {
    /// The Redis version SplitKV's replies follow.
    pub redis_version: &'a str,
    /// The TCP port the server listens on.
    pub tcp_port: u16,
    /// The storage node's address.
    pub storage: &'a str,
    /// Connections open now.
    pub connected_clients: usize,
    /// Clients waiting in a blocking command (BLPOP and its kin).
    pub blocked_clients: usize,
    /// Connections accepted since start.
    pub total_connections: u64,
    /// Commands carried out since start (or since CONFIG RESETSTAT).
    pub total_commands: u64,
    /// Seconds since the server started.
    pub uptime_seconds: u64,
    /// The node's role and lag ([`Engine::replication_async`]), when the
    /// storage node answered for it.
    pub replication: Option<&'a Replication>,
    /// The storage node's figures ([`Engine::storage_stats_async`]), when
    /// it answered for them.
    pub storage_stats: Option<&'a StatsReport>,
}

/// True if INFO with the sections `wanted` (lower case) shows `section`.
pub fn shows(section: &str, wanted: &[String]) -> bool {
    wanted.is_empty()
        || wanted
            .iter()
            .any(|w| w == section || w == "all" || w == "everything" || w == "default")
}

/// INFO's text for the sections `wanted` names (lower case; empty means
/// the default set, which is every section; `all` and `everything` are
/// every section too). Sections are separated by a blank line.
pub fn render(engine: &Engine, facts: &ServerFacts<'_>, wanted: &[String]) -> String {
    let mut text = String::with_capacity(2048);
    for section in SECTIONS {
        if !shows(section, wanted) {
            continue;
        }
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        section_text(&mut text, section, engine, facts);
    }
    text
}

fn section_text(text: &mut String, section: &str, engine: &Engine, facts: &ServerFacts<'_>) {
    let stats = engine.stats();
    let _ = match section {
        "server" => write!(
            text,
            "# Server\r\n\
             redis_version:{}\r\n\
             splitkv_version:{}\r\n\
             redis_mode:standalone\r\n\
             os:{}\r\n\
             arch_bits:64\r\n\
             process_id:{}\r\n\
             tcp_port:{}\r\n\
             uptime_in_seconds:{}\r\n\
             uptime_in_days:{}\r\n",
            facts.redis_version,
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::process::id(),
            facts.tcp_port,
            facts.uptime_seconds,
            facts.uptime_seconds / 86_400,
        ),
        "clients" => write!(
            text,
            "# Clients\r\nconnected_clients:{}\r\nblocked_clients:{}\r\ntracking_clients:0\r\n",
            facts.connected_clients, facts.blocked_clients
        ),
        "memory" => write!(
            text,
            "# Memory\r\nused_memory:{}\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n",
            stats.index.memory_bytes
        ),
        // The compute node keeps nothing on disk of its own: the storage
        // node persists every acknowledged write.
        "persistence" => write!(
            text,
            "# Persistence\r\nloading:0\r\nasync_loading:0\r\nrdb_bgsave_in_progress:0\r\n\
             aof_enabled:0\r\naof_rewrite_in_progress:0\r\n"
        ),
        "stats" => write!(
            text,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
             expired_keys:{}\r\nkeyspace_hits:{}\r\nkeyspace_misses:0\r\n",
            facts.total_connections, facts.total_commands, stats.expired_keys, stats.gets
        ),
        "replication" => replication_text(text, engine, facts),
        "keyspace" => {
            text.push_str("# Keyspace\r\n");
            let keys = engine.len();
            if keys > 0 {
                let _ = write!(
                    text,
                    "db0:keys={keys},expires={},avg_ttl={}\r\n",
                    stats.expiring_keys.min(keys),
                    stats.avg_ttl_ms
                );
            }
            Ok(())
        }
        _ => write!(
            text,
            "# SplitKV\r\n\
             storage_node:{}\r\n\
             index_keys:{}\r\n\
             index_tombstones:{}\r\n\
             index_memory_bytes:{}\r\n\
             index_bytes_per_key:{:.1}\r\n\
             reads:{}\r\n\
             read_hits:{}\r\n\
             read_misses:{}\r\n\
             hit_ratio:{:.4}\r\n\
             window_fetches:{}\r\n\
             window_fetch_bytes:{}\r\n\
             point_reads:{}\r\n\
             read_batches:{}\r\n\
             relocations:{}\r\n\
             cache_hits:{}\r\n\
             cache_misses:{}\r\n\
             cache_bytes:{}\r\n\
             cache_entries:{}\r\n\
             cache_capacity_bytes:{}\r\n\
             puts:{}\r\n\
             put_batches:{}\r\n\
             deletes:{}\r\n\
             partitions:{}\r\n\
             storage_connections_up:{}\r\n\
             writer_epoch:{}\r\n\
             fenced:{}\r\n\
             tail_pulls:{}\r\n",
            facts.storage,
            stats.index.live_keys,
            stats.index.tombstones,
            stats.index.memory_bytes,
            stats.index_bytes_per_key(),
            stats.gets,
            stats.hits,
            stats.misses,
            stats.hit_ratio(),
            stats.window_fetches,
            stats.window_fetch_bytes,
            stats.point_reads,
            stats.read_batches,
            stats.relocations,
            stats.cache_hits,
            stats.cache_misses,
            stats.cache_bytes,
            stats.cache_entries,
            stats.cache_capacity_bytes,
            stats.puts,
            stats.put_batches,
            stats.deletes,
            stats.partitions,
            stats.links_up,
            stats.epoch,
            u8::from(stats.fenced),
            stats.tail_pulls,
        )
        .and_then(|()| match facts.storage_stats {
            Some(storage) => storage_text(text, storage),
            None => Ok(()),
        }),
    };
}

/// The storage node's space, garbage-collection and checkpoint figures,
/// summed over its partitions (`storage_checkpoint_seq` is the highest a
/// checkpoint covers, `storage_checkpoint_age_ms` the time since the
/// newest was made; both -1 without one).
fn storage_text(text: &mut String, storage: &StatsReport) -> std::fmt::Result {
    let sum = |field: fn(&splitkv_common::message::PartitionReport) -> u64| -> u64 {
        storage.partitions.iter().map(field).sum()
    };
    let newest = storage
        .partitions
        .iter()
        .filter(|p| p.checkpoint_made_at_ms > 0)
        .max_by_key(|p| p.checkpoint_made_at_ms);
    let (checkpoint_seq, checkpoint_age_ms) = match newest {
        Some(p) => (
            storage
                .partitions
                .iter()
                .map(|p| p.checkpoint_seq)
                .max()
                .unwrap_or(0) as i64,
            splitkv_common::clock::now_ms().saturating_sub(p.checkpoint_made_at_ms) as i64,
        ),
        None => (-1, -1),
    };
    write!(
        text,
        "storage_live_bytes:{}\r\n\
         storage_dead_bytes:{}\r\n\
         storage_segments:{}\r\n\
         storage_gc_runs:{}\r\n\
         storage_reclaimed_bytes:{}\r\n\
         storage_relocations:{}\r\n\
         storage_keylog_bytes:{}\r\n\
         storage_checkpoint_seq:{checkpoint_seq}\r\n\
         storage_checkpoint_age_ms:{checkpoint_age_ms}\r\n\
         storage_refusing_writes:{}\r\n",
        sum(|p| p.live_bytes),
        sum(|p| p.dead_bytes),
        sum(|p| p.segments),
        sum(|p| p.gc_runs),
        sum(|p| p.reclaimed_bytes),
        sum(|p| p.relocations),
        sum(|p| p.keylog_end - p.keylog_start),
        u8::from(storage.refusing_writes.is_some()),
    )
}

/// The replication section: a writer is a master without replicas; a
/// reader is a replica of the storage node it follows, with the fields
/// Redis gives a replica and SplitKV's own: the highest sequence number
/// applied, and the lag in key-log entries and in milliseconds.
fn replication_text(
    text: &mut String,
    engine: &Engine,
    facts: &ServerFacts<'_>,
) -> std::fmt::Result {
    let applied_seq = engine.applied_seq();
    if engine.is_writer() {
        return write!(
            text,
            "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n\
             master_repl_offset:{applied_seq}\r\nsplitkv_applied_seq:{applied_seq}\r\n"
        );
    }
    let (host, port) = storage_host_port(facts.storage);
    let following = engine.following();
    let (lag_entries, lag_ms) = match facts.replication {
        Some(r) => (r.lag_entries.to_string(), r.lag_ms.to_string()),
        None => ("unknown".to_string(), "unknown".to_string()),
    };
    write!(
        text,
        "# Replication\r\nrole:slave\r\nmaster_host:{host}\r\nmaster_port:{port}\r\n\
         master_link_status:{}\r\nmaster_sync_in_progress:0\r\n\
         slave_read_repl_offset:{applied_seq}\r\nslave_repl_offset:{applied_seq}\r\n\
         slave_priority:100\r\nslave_read_only:1\r\nreplica_announced:1\r\n\
         connected_slaves:0\r\nmaster_repl_offset:{applied_seq}\r\n\
         splitkv_applied_seq:{applied_seq}\r\nsplitkv_lag_entries:{lag_entries}\r\n\
         splitkv_lag_ms:{lag_ms}\r\n",
        if following { "up" } else { "down" },
    )
}
