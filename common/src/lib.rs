//! Pieces shared by every SplitKV node: the on-disk record formats that both
//! halves parse, the wire protocol (framing and messages, free of I/O), the
//! QUIC transport settings, TLS and certificates, and the client that
//! compute nodes use to talk to a storage node.

pub mod certs;
pub mod client;
pub mod clock;
pub mod frame;
pub mod limits;
pub mod message;
pub mod record;
pub mod tls;
pub mod transport;
