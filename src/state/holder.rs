//! Lease owner strings: who holds a lease, written so that a later process can tell
//! whether that holder is provably gone.
//!
//! An owner is `<run_id>[/<role>]/<host>/pid-<n>` (`20261202T174000123Z-a1b2c3/db1/pid-42`,
//! `…/baseline-anchor/db1/pid-42`). A holder is *provably gone* only when its host is
//! this host and no process with its pid is alive here. Anything else — another host,
//! an owner written before the host was recorded (`<run_id>/pid-<n>`), a pid that is alive
//! (even a reused one) — is *not* provably gone, so a recovery command refuses rather
//! than guesses. Caveat: two containers that share one hostname but not one pid
//! namespace cannot tell each other's processes apart; give them distinct hostnames.

/// The owner string of this process for a run (`role` e.g. `baseline-anchor`).
pub fn owner(run_id: &str, role: Option<&str>) -> String {
    let host = this_host();
    let pid = std::process::id();
    match role {
        Some(role) => format!("{run_id}/{role}/{host}/pid-{pid}"),
        None => format!("{run_id}/{host}/pid-{pid}"),
    }
}

/// This machine's host name (`unknown-host` when it cannot be read); `/` never occurs.
pub fn this_host() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates on success.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let name = if rc == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        String::new()
    };
    let name = name.trim().replace('/', "_");
    if name.is_empty() {
        "unknown-host".to_owned()
    } else {
        name
    }
}

/// Where an owner string says its process runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub host: String,
    pub pid: u32,
}

/// The host and pid of an owner string; `None` for one that does not record both.
pub fn parse(owner: &str) -> Option<Holder> {
    let mut parts = owner.rsplit('/');
    let pid = parts.next()?.strip_prefix("pid-")?.parse().ok()?;
    let host = parts.next()?;
    // The old format `<run_id>/pid-<n>` has the run id where the host would be.
    parts.next()?;
    Some(Holder {
        host: host.to_owned(),
        pid,
    })
}

/// What can be said about a lease holder from this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// On this host, and its pid is not alive: it can hold nothing any more.
    Dead,
    /// On this host, and a process with its pid is alive.
    Alive,
    /// On another host, or the owner does not say where it runs.
    Unknown,
}

/// Whether `owner` is provably gone (see the module doc).
pub fn liveness(owner: &str) -> Liveness {
    match parse(owner) {
        Some(holder) if holder.host == this_host() => {
            if pid_alive(holder.pid) {
                Liveness::Alive
            } else {
                Liveness::Dead
            }
        }
        _ => Liveness::Unknown,
    }
}

/// True when a process with `pid` exists here (also one we may not signal).
fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return true;
    }
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_round_trip_host_and_pid() {
        let own = owner("20261202T174000123Z-a1b2c3", None);
        let holder = parse(&own).unwrap();
        assert_eq!(holder.host, this_host());
        assert_eq!(holder.pid, std::process::id());
        let anchor = owner("r", Some("baseline-anchor"));
        assert_eq!(parse(&anchor).unwrap().pid, std::process::id());
        assert_eq!(
            parse("20261202T174000123Z-a1b2c3/pid-42"),
            None,
            "old format"
        );
        assert_eq!(parse("a"), None);
        assert_eq!(parse("r/h/pid-x"), None);
    }

    #[test]
    fn only_a_dead_pid_on_this_host_is_dead() {
        assert_eq!(liveness(&owner("r", None)), Liveness::Alive);
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let here = format!("r/{}/pid-{pid}", this_host());
        assert_eq!(liveness(&here), Liveness::Dead);
        let elsewhere = format!("r/{}-elsewhere/pid-{pid}", this_host());
        assert_eq!(liveness(&elsewhere), Liveness::Unknown);
        assert_eq!(liveness(&format!("r/pid-{pid}")), Liveness::Unknown);
    }
}
