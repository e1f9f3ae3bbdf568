//! Record reads of many callers that go to one storage connection while a
//! read of theirs is in flight share the connection's next request: the
//! first read goes alone at once, those that waited for it go together in
//! one `GetMany`, and each caller gets its own records. A caller that goes
//! away before it has sent what it leads leaves no lane taken.
//!
//! The storage node runs on a disk whose value-log reads wait at a gate
//! ([`GatedDisk`]), so that a test holds a read in flight for as long as it
//! needs.

mod support;

use std::ffi::OsString;
use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::Poll;

use bytes::Bytes;
use compute_node::Engine;
use storage_node::disk::FileLock;
use storage_node::{Disk, DiskFile, FileKind, IoEngineKind, Mapping, OsDisk};
use support::{StorageNode, value_for};

/// Whether reads may pass, and how many wait.
#[derive(Default)]
struct GateState {
    closed: bool,
    waiting: usize,
}

/// Holds the reads of a [`GatedDisk`]'s direct files while closed.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

impl Gate {
    fn close(&self) {
        self.state.lock().expect("gate").closed = true;
    }

    fn open(&self) {
        self.state.lock().expect("gate").closed = false;
        self.changed.notify_all();
    }

    /// Waits until `n` reads wait at the gate.
    fn wait_until_waiting(&self, n: usize) {
        let state = self.state.lock().expect("gate");
        let _state = self
            .changed
            .wait_while(state, |state| state.waiting < n)
            .expect("gate");
    }

    /// Blocks while the gate is closed.
    fn pass(&self) {
        let mut state = self.state.lock().expect("gate");
        state.waiting += 1;
        self.changed.notify_all();
        state = self
            .changed
            .wait_while(state, |state| state.closed)
            .expect("gate");
        state.waiting -= 1;
    }
}

/// The real disk, but every read of a direct file (the value log) first
/// passes the gate. Reads that must not wait find nothing in memory, so
/// every record read takes the path that may wait.
struct GatedDisk {
    os: OsDisk,
    gate: Arc<Gate>,
}

struct GatedFile {
    file: Arc<dyn DiskFile>,
    gate: Arc<Gate>,
}

impl Disk for GatedDisk {
    fn open(&self, path: &Path, kind: FileKind, create: bool) -> io::Result<Arc<dyn DiskFile>> {
        let file = self.os.open(path, kind, create)?;
        Ok(match kind {
            FileKind::Direct => Arc::new(GatedFile {
                file,
                gate: Arc::clone(&self.gate),
            }),
            FileKind::Mapped | FileKind::Plain => file,
        })
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.os.create_dir_all(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.os.sync_dir(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.os.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.os.remove_file(path)
    }
    fn exists(&self, path: &Path) -> io::Result<bool> {
        self.os.exists(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<OsString>> {
        self.os.list_dir(path)
    }
    fn try_lock(&self, path: &Path) -> io::Result<FileLock> {
        self.os.try_lock(path)
    }
    fn free_bytes(&self, path: &Path) -> io::Result<u64> {
        self.os.free_bytes(path)
    }
    fn io_engine(&self) -> IoEngineKind {
        self.os.io_engine()
    }
}

impl DiskFile for GatedFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.gate.pass();
        self.file.read_at(buf, offset)
    }
    fn read_cached_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.gate.pass();
        self.file.read_cached_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_at(buf, offset)
    }
    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        self.file.allocate(offset, len)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn len_bytes(&self) -> io::Result<u64> {
        self.file.len_bytes()
    }
    fn map(&self, offset: u64, len: usize) -> io::Result<Box<dyn Mapping>> {
        self.file.map(offset, len)
    }
}

type Read = Pin<Box<dyn Future<Output = Vec<compute_node::Result<Option<Bytes>>>> + Send>>;

/// A read of `key` by a caller of its own.
fn read_of(engine: &Arc<Engine>, key: &[u8]) -> Read {
    let engine = Arc::clone(engine);
    let key = key.to_vec();
    Box::pin(async move { engine.get_each_async(&[&key[..]]).await })
}

/// Runs `reads` together; once each has been polled (and has sent its
/// request or joined its lane), calls `polled`.
async fn run_together(reads: Vec<Read>, polled: impl FnOnce()) -> Vec<Option<Bytes>> {
    let mut reads: Vec<(Read, Option<Option<Bytes>>)> =
        reads.into_iter().map(|read| (read, None)).collect();
    let mut polled = Some(polled);
    std::future::poll_fn(|cx| {
        for (read, outcome) in &mut reads {
            if outcome.is_none()
                && let Poll::Ready(mut answer) = read.as_mut().poll(cx)
            {
                assert_eq!(answer.len(), 1, "one outcome for one key");
                *outcome = Some(answer.remove(0).expect("read"));
            }
        }
        if let Some(polled) = polled.take() {
            polled();
        }
        if reads.iter().all(|(_, outcome)| outcome.is_some()) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    reads
        .into_iter()
        .map(|(_, outcome)| outcome.flatten())
        .collect()
}

#[test]
fn reads_that_wait_for_their_connection_share_its_next_request() {
    let gate = Arc::new(Gate::default());
    let disk = Arc::new(GatedDisk {
        os: OsDisk::new(IoEngineKind::Uring),
        gate: Arc::clone(&gate),
    });
    let mut storage = StorageNode::start_on_disk(4, disk);
    let keys: Vec<Vec<u8>> = (0..16).map(|i| format!("key{i}").into_bytes()).collect();
    let values: Vec<Vec<u8>> = keys.iter().map(|key| value_for(key, 1, 4000)).collect();
    {
        let writer = storage.connect();
        let pairs = keys
            .iter()
            .zip(&values)
            .map(|(key, value)| (Bytes::from(key.clone()), Bytes::from(value.clone())))
            .collect();
        let handle = writer.handle().clone();
        for outcome in handle.block_on(writer.put_each_async(0, pairs)) {
            outcome.expect("put");
        }
    }
    // A clean restart leaves the records on the disk alone, and a new
    // compute node has none of them in its value cache; records larger
    // than half a window are never read through windows.
    storage.stop();
    storage.resume();
    let mut config = storage.engine_config();
    config.writer = false;
    config.window_bytes = 4096;
    let engine = Arc::new(Engine::connect(config).expect("connect reader"));
    let handle = engine.handle().clone();
    let before = engine.stats();

    gate.close();
    let first = handle.spawn(read_of(&engine, &keys[0]));
    gate.wait_until_waiting(1);
    // The first read is on the storage node, held at the gate: the fifteen
    // that come now find its connection in flight.
    let (polled_tx, polled_rx) = std::sync::mpsc::channel();
    let rest = handle.spawn(run_together(
        keys[1..].iter().map(|key| read_of(&engine, key)).collect(),
        move || polled_tx.send(()).expect("test waits"),
    ));
    polled_rx.recv().expect("the fifteen reads were polled");
    assert_eq!(
        engine.stats().read_batches - before.read_batches,
        1,
        "only the first read was sent while its request is in flight"
    );
    gate.open();

    let mut got = handle.block_on(first).expect("first read");
    assert_eq!(
        got.remove(0).expect("read"),
        Some(Bytes::from(values[0].clone()))
    );
    let got = handle.block_on(rest).expect("other reads");
    for ((key, value), got) in keys[1..].iter().zip(&values[1..]).zip(got) {
        assert_eq!(
            got,
            Some(Bytes::from(value.clone())),
            "{}",
            String::from_utf8_lossy(key)
        );
    }
    let after = engine.stats();
    assert_eq!(after.point_reads - before.point_reads, 16);
    assert_eq!(
        after.read_batches - before.read_batches,
        2,
        "the first read alone, then the fifteen that waited for it in one request"
    );
}

#[test]
fn a_caller_dropped_while_it_waits_to_send_leaves_no_lane_taken() {
    let gate = Arc::new(Gate::default());
    let disk = Arc::new(GatedDisk {
        os: OsDisk::new(IoEngineKind::Uring),
        gate: Arc::clone(&gate),
    });
    let mut storage = StorageNode::start_on_disk(4, disk);
    let keys: Vec<Vec<u8>> = (0..3).map(|i| format!("key{i}").into_bytes()).collect();
    let values: Vec<Vec<u8>> = keys.iter().map(|key| value_for(key, 1, 4000)).collect();
    {
        let writer = storage.connect();
        let handle = writer.handle().clone();
        // key0 and key1 in partition 0, key2 in partition 1.
        for (partition, at) in [(0, 0), (0, 1), (1, 2)] {
            let pair = (
                Bytes::from(keys[at].clone()),
                Bytes::from(values[at].clone()),
            );
            for outcome in handle.block_on(writer.put_each_async(partition, vec![pair])) {
                outcome.expect("put");
            }
        }
    }
    storage.stop();
    storage.resume();
    // One request in flight fills a connection; records larger than half
    // a window are never read through windows.
    let mut config = storage.engine_config();
    config.max_in_flight_requests = 1;
    config.window_bytes = 4096;
    let engine = Arc::new(Engine::connect(config).expect("connect"));
    let handle = engine.handle().clone();
    let before = engine.stats();

    // A read of key0, a batch of its own through partition 0's lane, holds
    // that connection full at the gate.
    gate.close();
    let alone = {
        let engine = Arc::clone(&engine);
        let key = keys[0].clone();
        handle.spawn(async move { engine.get_async(&key).await })
    };
    gate.wait_until_waiting(1);
    let held = engine.stats();
    assert!(
        held.read_batches > before.read_batches,
        "key0's read went out as a batch"
    );
    // A caller of key1 and key2 queues on both lanes: partition 1's batch
    // goes out, partition 0's waits behind key0's read for room on its
    // connection; the caller goes away there.
    let dropped = handle.spawn(read_many_of(&engine, &[&keys[1], &keys[2]]));
    wait_until("the caller's batch to be sent", || {
        engine.stats().read_batches > held.read_batches
    });
    dropped.abort();
    assert!(
        handle.block_on(dropped).is_err_and(|e| e.is_cancelled()),
        "the caller was dropped while it waited"
    );
    gate.open();
    assert_eq!(
        handle.block_on(alone).expect("read").expect("read"),
        Some(Bytes::from(values[0].clone()))
    );
    // Partition 1's lane was handed on: a later read of key2 is sent.
    let later = handle.block_on(async {
        tokio::time::timeout(
            std::time::Duration::from_secs(10),
            read_of(&engine, &keys[2]),
        )
        .await
    });
    let mut later = later.expect("a read of a lane left by a dropped caller is sent");
    assert_eq!(
        later.remove(0).expect("read"),
        Some(Bytes::from(values[2].clone()))
    );
}

/// A read of `keys` by a caller of its own, in one multi-key read.
fn read_many_of(engine: &Arc<Engine>, keys: &[&[u8]]) -> Read {
    let engine = Arc::clone(engine);
    let keys: Vec<Vec<u8>> = keys.iter().map(|key| key.to_vec()).collect();
    Box::pin(async move {
        let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        engine.get_each_async(&keys).await
    })
}

/// Waits until `done` holds, checking every few milliseconds, for at most
/// 30 seconds.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}
