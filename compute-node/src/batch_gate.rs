//! Whole batches for multi-key reads: the index changes of one batch (a
//! writer's acknowledged `write_many`, or a chunk of key-log frames a
//! reader follows or a rebuild merges) are applied shard by shard, so a
//! read of several keys could otherwise see some of a batch's keys new and
//! others old. A multi-key read resolves its keys between two looks at the
//! gate that find no batch being applied and none finished in between (a
//! seqlock), and after [`OPTIMISTIC_TRIES`] failed tries holds the gate
//! exclusively, which waits for the batches being applied and holds new
//! ones back for the few microseconds the resolution takes. A batch holds
//! the gate shared, so batches never wait for each other.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

/// Tries without the lock before a multi-key read takes it.
pub const OPTIMISTIC_TRIES: usize = 64;

/// The gate (see the module documentation).
#[derive(Debug, Default)]
pub struct BatchGate {
    gate: RwLock<()>,
    /// Batches finished since the start.
    finished: AtomicU64,
}

impl BatchGate {
    /// Applies a batch with `apply`: no multi-key read resolves its keys
    /// while it runs.
    pub fn apply<T>(&self, apply: impl FnOnce() -> T) -> T {
        let _shared = self.gate.read();
        let done = apply();
        self.finished.fetch_add(1, Ordering::SeqCst);
        done
    }

    /// Runs `resolve` (which must only read the index, and may run more
    /// than once) at a moment when no batch is half applied, and returns
    /// what it returned then.
    pub fn resolve<T>(&self, mut resolve: impl FnMut() -> T) -> T {
        for _ in 0..OPTIMISTIC_TRIES {
            let before = self.finished.load(Ordering::SeqCst);
            if self.gate.is_locked() {
                std::hint::spin_loop();
                continue;
            }
            let resolved = resolve();
            if !self.gate.is_locked() && self.finished.load(Ordering::SeqCst) == before {
                return resolved;
            }
        }
        let _exclusive = self.gate.write();
        resolve()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    use super::*;

    #[test]
    fn a_resolution_never_sees_half_a_batch() {
        // Two cells a batch always sets to the same value, one after the
        // other; a resolution must see them equal.
        let gate = Arc::new(BatchGate::default());
        let cells = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (gate, cells, stop) = (gate.clone(), cells.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    gate.apply(|| {
                        cells[0].store(n, Ordering::SeqCst);
                        for _ in 0..200 {
                            std::hint::spin_loop();
                        }
                        cells[1].store(n, Ordering::SeqCst);
                    });
                }
            })
        };
        // Reads go on until they have overlapped many batches.
        let mut reads = 0u64;
        while reads < 20_000 || cells[1].load(Ordering::SeqCst) < 5_000 {
            reads += 1;
            let (a, b) = gate.resolve(|| {
                (
                    cells[0].load(Ordering::SeqCst),
                    cells[1].load(Ordering::SeqCst),
                )
            });
            assert_eq!(a, b, "half a batch seen");
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().expect("writer");
    }
}
