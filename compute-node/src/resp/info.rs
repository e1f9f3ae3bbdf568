//! The text of the INFO command.

use std::fmt::Write as _;

use crate::Engine;

/// INFO's sections: server, keyspace, and SplitKV's own figures (index size
/// and bytes per key, window hit ratio, connections and fencing).
pub fn render(engine: &Engine, extra: &str) -> String {
    let stats = engine.stats();
    let mut text = String::with_capacity(1024);
    let _ = write!(
        text,
        "# Server\r\nredis_version:7.2.0\r\nsplitkv_version:{}\r\nprocess_id:{}\r\n{extra}\r\n",
        env!("CARGO_PKG_VERSION"),
        std::process::id(),
    );
    let _ = write!(
        text,
        "# Keyspace\r\ndb0:keys={},expires=0,avg_ttl=0\r\n\r\n",
        stats.index.live_keys
    );
    let _ = write!(
        text,
        "# SplitKV\r\n\
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
         cache_hits:{}\r\n\
         cache_misses:{}\r\n\
         cache_bytes:{}\r\n\
         cache_entries:{}\r\n\
         cache_capacity_bytes:{}\r\n\
         puts:{}\r\n\
         deletes:{}\r\n\
         partitions:{}\r\n\
         storage_connections_up:{}\r\n\
         writer_epoch:{}\r\n\
         fenced:{}\r\n\
         tail_pulls:{}\r\n",
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
        stats.cache_hits,
        stats.cache_misses,
        stats.cache_bytes,
        stats.cache_entries,
        stats.cache_capacity_bytes,
        stats.puts,
        stats.deletes,
        stats.partitions,
        stats.links_up,
        stats.epoch,
        u8::from(stats.fenced),
        stats.tail_pulls,
    );
    text
}
