//! compute-node
