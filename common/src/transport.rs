//! QUIC transport settings shared by both ends, and the UDP endpoints they
//! run on. Every setting that differs from quinn's default is here, with the
//! reason.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Duration;

use quinn::{AckFrequencyConfig, EndpointConfig, MtuDiscoveryConfig, TransportConfig, VarInt};
use quinn_proto::HashedConnectionIdGenerator;

use crate::tls::NodeIdentity;

/// Most datagrams quinn hands to the kernel in one segmentation-offload
/// (GSO) send (quinn's `MAX_TRANSMIT_SEGMENTS`).
const QUINN_MAX_GSO_SEGMENTS: usize = 10;
/// Most UDP payload bytes one GSO send may carry: the datagram the kernel
/// segments is at most 65 535 bytes, 28 of them IPv4 and UDP headers.
const MAX_GSO_SEND_PAYLOAD_BYTES: usize = 65_535 - 28;
/// The largest datagram payload MTU discovery may reach: ten datagrams of
/// this size still fit one GSO send. A larger send fails with `EMSGSIZE`,
/// which quinn takes for a failed MTU probe and drops silently; whole
/// batches of datagrams would vanish, MTU discovery would take the path for
/// a black hole and fall back to 1200 bytes, and a new connection's bulk
/// transfers would crawl through losses.
pub const MAX_UDP_PAYLOAD_BYTES: u16 = (MAX_GSO_SEND_PAYLOAD_BYTES / QUINN_MAX_GSO_SEGMENTS) as u16;

/// Tunable transport settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportSettings {
    /// Largest UDP payload that MTU discovery may try. Discovery starts from
    /// the safe 1200 bytes and raises the datagram size only as far as the
    /// path carries it, so a high bound costs nothing on a 1500-byte link
    /// and lets loopback or jumbo-frame links carry a 4 KiB put in one
    /// datagram (about a third less CPU per put than three datagrams).
    /// Capped at [`MAX_UDP_PAYLOAD_BYTES`].
    pub max_udp_payload_bytes: u16,
    /// Keep-alive period: persistent connections sit idle between bursts
    /// and would otherwise be closed by the idle timeout.
    pub keep_alive_ms: u64,
    /// A connection with no traffic (keep-alives included) for this long is
    /// considered dead, which is how a vanished peer is noticed (killed
    /// without a restart, or restarted at another address; a restart at
    /// the same address is noticed at once, from its stateless reset).
    /// Requests do not close a connection when they pass their deadlines,
    /// so this bounds how long a connection to a peer that is gone stays
    /// open. The lower of the two peers' values applies.
    pub idle_timeout_ms: u64,
    /// Per-stream receive window. A 16 MiB range read is streamed without
    /// waiting for window updates when this is at least a whole range.
    pub stream_window_bytes: u32,
    /// Per-connection receive window (several ranges in flight at once).
    pub connection_window_bytes: u32,
    /// Concurrent bidirectional streams a peer may open: one control
    /// stream plus bulk streams. Bounds what a misbehaving client can make
    /// the node hold.
    pub max_concurrent_streams: u32,
    /// Requested UDP socket send and receive buffers. Bursts of a 16 MiB
    /// range outrun the default ~200 KiB buffers; the kernel caps the
    /// request at `net.core.{r,w}mem_max`.
    pub socket_buffer_bytes: usize,
    /// Ack-eliciting packets the peer may receive from this end before it
    /// must acknowledge them at once (QUIC's ACK-frequency extension, which
    /// quinn speaks on both ends; a peer without it acknowledges as usual).
    /// Short of that the peer waits for a packet of its own to carry the
    /// acknowledgement, or for its maximum ACK delay (25 ms by default);
    /// a packet that arrives out of order is still acknowledged at once.
    /// quinn's default of 1 makes a storage node answering puts one at a
    /// time send an ACK-only datagram, just ahead of the answer, for every
    /// other request.
    pub ack_eliciting_threshold: u32,
}

impl Default for TransportSettings {
    fn default() -> Self {
        Self {
            max_udp_payload_bytes: MAX_UDP_PAYLOAD_BYTES,
            keep_alive_ms: 2_000,
            idle_timeout_ms: 10_000,
            stream_window_bytes: 32 << 20,
            connection_window_bytes: 64 << 20,
            max_concurrent_streams: 64,
            socket_buffer_bytes: 4 << 20,
            ack_eliciting_threshold: 4,
        }
    }
}

impl TransportSettings {
    /// The quinn transport configuration for these settings.
    pub fn transport_config(&self) -> TransportConfig {
        let mut config = TransportConfig::default();
        config
            .keep_alive_interval(Some(Duration::from_millis(self.keep_alive_ms)))
            .max_idle_timeout(Some(
                VarInt::from_u64(self.idle_timeout_ms)
                    .unwrap_or(VarInt::MAX)
                    .into(),
            ))
            .stream_receive_window(VarInt::from_u32(self.stream_window_bytes))
            .receive_window(VarInt::from_u32(self.connection_window_bytes))
            .send_window(u64::from(self.connection_window_bytes))
            .max_concurrent_bidi_streams(VarInt::from_u32(self.max_concurrent_streams))
            .max_concurrent_uni_streams(VarInt::from_u32(0))
            // Bulk responses are sent one after the other rather than
            // interleaved, so the first of two prefetched ranges arrives
            // whole as early as possible (the control stream has a higher
            // priority and is never held up by them).
            .send_fairness(false);
        let mut mtu = MtuDiscoveryConfig::default();
        // Losses under congestion can look like a black hole and drop the
        // datagram size to the 1200-byte minimum; probe again soon instead
        // of after quinn's default minute.
        mtu.upper_bound(self.max_udp_payload_bytes.min(MAX_UDP_PAYLOAD_BYTES))
            .black_hole_cooldown(Duration::from_secs(2));
        config.mtu_discovery_config(Some(mtu));
        let mut ack = AckFrequencyConfig::default();
        ack.ack_eliciting_threshold(VarInt::from_u32(self.ack_eliciting_threshold));
        config.ack_frequency_config(Some(ack));
        config
    }

    /// The quinn endpoint configuration: accepts datagrams up to the
    /// discovery bound (quinn's default receive size is 1472 bytes). A
    /// server passes its identity, from which its stateless-reset key and
    /// connection-ID key are derived (stable across restarts); clients use
    /// random ones.
    pub fn endpoint_config(&self, stable: Option<&NodeIdentity>) -> EndpointConfig {
        let mut config = match stable {
            Some(identity) => {
                let mut config = EndpointConfig::new(identity.stateless_reset_key());
                let key = identity.connection_id_key();
                config.cid_generator(move || Box::new(HashedConnectionIdGenerator::from_key(key)));
                config
            }
            None => EndpointConfig::default(),
        };
        if config
            .max_udp_payload_size(self.max_udp_payload_bytes.max(1200))
            .is_err()
        {
            tracing::warn!(
                "UDP payload bound {} is out of range; keeping quinn's default",
                self.max_udp_payload_bytes
            );
        }
        config
    }

    /// Binds a UDP socket with the configured buffer sizes.
    pub fn bind(&self, addr: SocketAddr) -> std::io::Result<UdpSocket> {
        let domain = socket2::Domain::for_address(addr);
        let socket =
            socket2::Socket::new(domain, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))?;
        if addr.is_ipv6() {
            // Accept IPv4-mapped peers too when bound to [::].
            let _ = socket.set_only_v6(false);
        }
        if let Err(e) = socket.set_recv_buffer_size(self.socket_buffer_bytes) {
            tracing::debug!("could not size the UDP receive buffer: {e}");
        }
        if let Err(e) = socket.set_send_buffer_size(self.socket_buffer_bytes) {
            tracing::debug!("could not size the UDP send buffer: {e}");
        }
        socket.bind(&addr.into())?;
        Ok(socket.into())
    }

    /// A server endpoint listening on `addr`, with connection IDs and
    /// stateless resets derived from `identity`, so that after a restart it
    /// can tell clients of its previous run that their connections are gone.
    pub fn server_endpoint(
        &self,
        addr: SocketAddr,
        server: quinn::ServerConfig,
        identity: &NodeIdentity,
    ) -> std::io::Result<quinn::Endpoint> {
        let socket = self.bind(addr)?;
        quinn::Endpoint::new(
            self.endpoint_config(Some(identity)),
            Some(server),
            socket,
            Arc::new(quinn::TokioRuntime),
        )
    }

    /// A client endpoint on an ephemeral port of the family of `peer`.
    pub fn client_endpoint(&self, peer: SocketAddr) -> std::io::Result<quinn::Endpoint> {
        let local: SocketAddr = if peer.is_ipv6() {
            "[::]:0".parse().expect("literal address")
        } else {
            "0.0.0.0:0".parse().expect("literal address")
        };
        let socket = self.bind(local)?;
        quinn::Endpoint::new(
            self.endpoint_config(None),
            None,
            socket,
            Arc::new(quinn::TokioRuntime),
        )
    }
}
