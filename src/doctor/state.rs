//! State checks: the store is reachable, who holds the lease and how recently it was
//! renewed, the last successful run and its lag, and the resource claims — ours checked
//! by the drain's own claim rule ([`crate::claims::refusal`]), read-only.

use super::{Check, Report};
use crate::config::Config;
use crate::state::holder::Liveness;
use crate::state::now_ms;

pub async fn checks(config: &Config, report: &mut Report) {
    let store = match crate::state::open(config).await {
        Ok(s) => s,
        Err(e) => {
            report.push(Check::from_error("state reachable", &e));
            return;
        }
    };
    let shown = match store.show(&config.job).await {
        Ok(v) => v,
        Err(e) => {
            report.push(Check::from_error("state reachable", &e));
            return;
        }
    };
    report.push(Check::ok("state reachable", store.describe()));
    report.push(lease_check(
        &shown,
        config.lease.ttl_seconds as i64 * 1000,
        now_ms(),
    ));
    report.push(last_run_check(&shown, &config.job));

    let claims = match store.list_claims().await {
        Ok(c) => c,
        Err(e) => {
            report.push(Check::from_error("claims", &e));
            return;
        }
    };
    let listed = if claims.is_empty() {
        "no claims recorded".to_owned()
    } else {
        claims
            .iter()
            .map(|c| format!("{} → {}", c.resource, c.job))
            .collect::<Vec<_>>()
            .join("; ")
    };
    report.push(Check::ok("claims", listed));
    if report.source_unreachable() {
        report.push(Check::warn(
            "claim",
            "not checked: the claims are named by the server's identity, and the source connection failed",
            "fix the source connection (see source connect), then run doctor again",
        ));
        return;
    }
    let resources = match crate::claims::claim_names(config).await {
        Ok(r) => r,
        Err(e) => {
            report.push(Check::from_error("claim", &e));
            return;
        }
    };
    for claim in resources {
        let name = format!("claim {}", claim.name);
        match crate::claims::holder(&claims, &claim) {
            Some(job) if job == config.job => report.push(Check::ok(name, "claimed by this job")),
            Some(job) => report.push(Check::from_error(
                name,
                &crate::claims::refusal(&claim.name, &config.job, job),
            )),
            None => report.push(Check::ok(name, "unclaimed; the first run claims it")),
        }
    }
}

/// The lease row from a `state show` document (`lease_owner`, `lease_expires_at_ms`).
pub fn lease_check(shown: &serde_json::Value, ttl_ms: i64, now: i64) -> Check {
    let owner = shown["lease_owner"].as_str();
    let expires = shown["lease_expires_at_ms"].as_i64();
    match (owner, expires) {
        (Some(owner), Some(expires))
            if expires > now && crate::state::holder::liveness(owner) == Liveness::Dead =>
        {
            Check::warn(
                "lease",
                format!(
                    "held by {owner}, a dead process on this host; expires in {}s",
                    (expires - now) / 1000
                ),
                "the next run on this host takes it over at once (`sluice lease release --config FILE` frees it now)",
            )
        }
        (Some(owner), Some(expires)) if expires > now => {
            let age_s = (now - (expires - ttl_ms)).max(0) / 1000;
            Check::ok(
                "lease",
                format!(
                    "held by {owner}, renewed {age_s}s ago, expires in {}s (a run is in progress)",
                    (expires - now) / 1000
                ),
            )
        }
        (Some(owner), Some(expires)) => Check::ok(
            "lease",
            format!(
                "last held by {owner}, expired {}s ago without release (that run stopped early); the next run takes over",
                (now - expires) / 1000
            ),
        ),
        _ => Check::ok("lease", "free"),
    }
}

/// The newest `drained` or `partial` run record and its lag.
pub fn last_run_check(shown: &serde_json::Value, job: &str) -> Check {
    let newest = shown["runs"].as_object().and_then(|runs| {
        runs.values()
            .filter_map(|r| r.get("summary"))
            .filter(|s| matches!(s["status"].as_str(), Some("drained" | "partial")))
            .max_by(|a, b| a["run_id"].as_str().cmp(&b["run_id"].as_str()))
    });
    match newest {
        Some(s) => Check::ok(
            "last successful run",
            format!(
                "{} {} up to {}, lag {}",
                s["run_id"].as_str().unwrap_or("?"),
                s["status"].as_str().unwrap_or("?"),
                s["to"].as_str().unwrap_or("?"),
                s["lag_seconds"]
                    .as_f64()
                    .map_or("unknown".to_owned(), |l| format!("{l:.1}s"))
            ),
        ),
        None => Check::warn(
            "last successful run",
            "no successful run recorded yet",
            format!("run `sluice drain --config <file>` for job {job}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Status;

    #[test]
    fn lease_rows() {
        let held = serde_json::json!({"lease_owner": "r1", "lease_expires_at_ms": 10_000});
        let c = lease_check(&held, 5_000, 7_000);
        assert!(
            c.detail.contains("renewed 2s ago, expires in 3s"),
            "{}",
            c.detail
        );
        let c = lease_check(&held, 5_000, 12_000);
        assert!(c.detail.contains("expired 2s ago"), "{}", c.detail);
        assert_eq!(lease_check(&serde_json::json!({}), 1, 1).detail, "free");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let owner = format!("r/{}/pid-{pid}", crate::state::holder::this_host());
        let dead = serde_json::json!({"lease_owner": owner, "lease_expires_at_ms": 10_000});
        let c = lease_check(&dead, 5_000, 7_000);
        assert!(c.detail.contains("a dead process"), "{}", c.detail);
        assert_eq!(c.status, Status::Warn);
        assert!(c.detail.contains(&owner));
    }

    #[test]
    fn last_run_picks_the_newest_success() {
        let shown = serde_json::json!({"runs": {
            "a": {"summary": {"run_id": "a", "status": "drained", "to": "pg:1", "lag_seconds": 1.5}},
            "b": {"summary": {"run_id": "b", "status": "failed"}},
        }});
        let c = last_run_check(&shown, "j");
        assert_eq!(c.status, Status::Ok);
        assert!(
            c.detail.starts_with("a drained up to pg:1, lag 1.5s"),
            "{}",
            c.detail
        );
        assert_eq!(
            last_run_check(&serde_json::json!({}), "j").status,
            Status::Warn
        );
    }
}
