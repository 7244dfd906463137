//! Amazon Resource Names: the one parser the config checks and the AWS clients share.
//!
//! Guarantees: pure (no I/O); an ARN is accepted only with all seven fields, the
//! expected service and resource type, a non-empty partition, region and name, and a
//! 12-digit account.

/// The region of an ARN of `service` whose resource part starts with `resource_type`
/// (`arn:<partition>:<service>:<region>:<12-digit account>:<resource_type>:<name>`), or
/// `None` when `arn` is not such an ARN. Callers turn `None` into their own config error.
pub fn region<'a>(arn: &'a str, service: &str, resource_type: &str) -> Option<&'a str> {
    let parts: Vec<&str> = arn.splitn(7, ':').collect();
    match parts[..] {
        ["arn", partition, svc, region, account, kind, name]
            if svc == service
                && kind == resource_type
                && !partition.is_empty()
                && !region.is_empty()
                && account.len() == 12
                && account.bytes().all(|b| b.is_ascii_digit())
                && !name.is_empty() =>
        {
            Some(region)
        }
        _ => None,
    }
}
