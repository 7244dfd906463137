//! What the kernel reports about a socket a protocol driver opened itself (mysql_async's
//! `Conn::new` keeps its socket and its progress to itself): whether the TCP connect to
//! the server is still waiting for an answer or the connection is up.
//!
//! Guarantees: nothing is sent on the network and no socket is touched — the process's
//! own descriptors and the kernel's TCP table are read from `/proc` (Linux), only when an
//! establishment has already stalled, and only sockets opened after [`Mark::now`] count,
//! so an older connection to the same server is never mistaken for the new one.
//! Elsewhere, or when `/proc` cannot be read, the answer is `None`.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The state of a new socket to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpState {
    /// `SYN_SENT`: the TCP connect has had no answer.
    Connecting(SocketAddr),
    /// `ESTABLISHED`: the connection is up.
    Connected(SocketAddr),
}

/// The socket inodes the process holds at one moment.
#[derive(Debug, Default)]
pub struct Mark(HashSet<u64>);

impl Mark {
    /// The sockets open now.
    pub fn now() -> Mark {
        Mark(own_socket_inodes().unwrap_or_default())
    }

    /// The state of a socket to one of `peers` opened since the mark, if the kernel
    /// says.
    pub fn new_socket_to(&self, peers: &[SocketAddr]) -> Option<TcpState> {
        let own = own_socket_inodes()?;
        let fresh: HashSet<u64> = own.difference(&self.0).copied().collect();
        if fresh.is_empty() {
            return None;
        }
        let mut table = String::new();
        for file in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
            if let Ok(text) = std::fs::read_to_string(file) {
                table.push_str(&text);
            }
        }
        state_in(&table, &fresh, peers)
    }
}

/// The inodes of the process's sockets (`/proc/self/fd/* -> socket:[inode]`).
fn own_socket_inodes() -> Option<HashSet<u64>> {
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    Some(
        entries
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter_map(|target| {
                let text = target.to_str()?;
                text.strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .parse()
                    .ok()
            })
            .collect(),
    )
}

/// The state of the first socket of `table` (the text of `/proc/net/tcp` and `tcp6`)
/// whose inode is in `inodes` and whose remote end is one of `peers`. Pure.
fn state_in(table: &str, inodes: &HashSet<u64>, peers: &[SocketAddr]) -> Option<TcpState> {
    table.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let inode: u64 = fields.get(9)?.parse().ok()?;
        if !inodes.contains(&inode) {
            return None;
        }
        let remote = parse_addr(fields.get(2)?)?;
        let peer = *peers
            .iter()
            .find(|p| p.port() == remote.port() && same_ip(p.ip(), remote.ip()))?;
        match *fields.get(3)? {
            "01" => Some(TcpState::Connected(peer)),
            "02" => Some(TcpState::Connecting(peer)),
            _ => None,
        }
    })
}

/// Equal addresses, an IPv4 address matching its IPv4-mapped IPv6 form.
fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    let canonical = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    canonical(a) == canonical(b)
}

/// `0100007F:0CEA` (IPv4) or 32 hex digits `:PORT` (IPv6): an address as the kernel
/// prints it, each 32-bit word of the network-order address printed as a native-endian
/// number.
fn parse_addr(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |hex: &str| u32::from_str_radix(hex, 16).ok().map(u32::to_ne_bytes);
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(ip)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_mut(4).enumerate() {
                chunk.copy_from_slice(&word(ip.get(i * 8..i * 8 + 8)?)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two lines of `/proc/net/tcp` on a little-endian machine: a connect to
    /// 127.0.0.1:3306 waiting for its SYN-ACK (inode 1001) and an established connection
    /// to the same server (inode 1002).
    const TABLE: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:9C40 0100007F:0CEA 02 00000000:00000000 01:00000000 00000000     0        0 1001 1 0000000000000000 20 4 0 10 -1
   1: 0100007F:9C41 0100007F:0CEA 01 00000000:00000000 00:00000000 00000000     0        0 1002 1 0000000000000000 20 4 0 10 -1
";

    #[test]
    #[cfg(target_endian = "little")]
    fn only_new_sockets_to_the_server_count() {
        let server: SocketAddr = "127.0.0.1:3306".parse().unwrap();
        let inodes = |list: &[u64]| list.iter().copied().collect::<HashSet<u64>>();
        assert_eq!(
            state_in(TABLE, &inodes(&[1001]), &[server]),
            Some(TcpState::Connecting(server))
        );
        assert_eq!(
            state_in(TABLE, &inodes(&[1002]), &[server]),
            Some(TcpState::Connected(server))
        );
        assert_eq!(state_in(TABLE, &inodes(&[7]), &[server]), None);
        let other: SocketAddr = "127.0.0.1:3307".parse().unwrap();
        assert_eq!(state_in(TABLE, &inodes(&[1001]), &[other]), None);
        // The IPv4-mapped form of the server's address is the server.
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:3306".parse().unwrap();
        assert_eq!(
            state_in(TABLE, &inodes(&[1002]), &[mapped]),
            Some(TcpState::Connected(mapped))
        );
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn ipv6_addresses_parse_word_by_word() {
        let loopback = parse_addr("00000000000000000000000001000000:0CEA").unwrap();
        assert_eq!(loopback, "[::1]:3306".parse().unwrap());
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_live_connection_is_seen_as_connected() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap();
        let mark = Mark::now();
        assert_eq!(mark.new_socket_to(&[server]), None);
        let _client = std::net::TcpStream::connect(server).unwrap();
        let _accepted = listener.accept().unwrap();
        assert_eq!(
            mark.new_socket_to(&[server]),
            Some(TcpState::Connected(server))
        );
        // A mark taken after the connection does not count it.
        assert_eq!(Mark::now().new_socket_to(&[server]), None);
    }
}
