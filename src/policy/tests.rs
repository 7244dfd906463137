//! The policy room's rules on small tables: output shapes, images, filters, refusals.

use std::sync::Arc;

use super::filter::{self, Verdict};
use super::*;
use crate::change::{Column, ColumnType, Op, Value};

const KEY_ENV: &str = "SLUICE_TEST_POLICY_KEY_UNIT";

fn config(policy: &str) -> Config {
    // SAFETY: tests of this module are the only readers of this variable.
    unsafe { std::env::set_var(KEY_ENV, "0123456789abcdef0123456789abcdef") };
    let text = format!(
        r#"
job: j
source:
  url: mysql://root@127.0.0.1:3306/app
  tables: [app.users, app.other]
destination: {{ type: local, path: ./out }}
state: {{ type: local, path: ./.sluice }}
policy:
  hash_key: {{ env: {KEY_ENV} }}
{policy}
"#
    );
    let config = crate::config::Config::parse(&text, "test").unwrap();
    check_config(&config).unwrap();
    config
}

fn users() -> Arc<TableSchema> {
    let col = |name: &str, ty: ColumnType, key: bool| Column {
        name: name.into(),
        ty,
        nullable: !key,
        key,
        source_type: "src".into(),
        field_metadata: Default::default(),
    };
    Arc::new(TableSchema {
        name: "app.users".into(),
        columns: vec![
            col("id", ColumnType::Int32, true),
            col("email", ColumnType::Utf8, false),
            col("ssn", ColumnType::Utf8, false),
            col("phone", ColumnType::Utf8, false),
            col("born", ColumnType::Date, false),
            col("tenant", ColumnType::Int64, false),
        ],
    })
}

fn row(id: i64, email: &str, tenant: i64) -> Vec<Value> {
    vec![
        Value::Int(id),
        Value::Text(email.into()),
        Value::Text("123-45-6789".into()),
        Value::Text("+1 555 0100".into()),
        Value::Date(19_000),
        Value::Int(tenant),
    ]
}

const FULL: &str = r#"  tables:
    app.users:
      exclude: [ssn]
      hash: [id, email]
      mask: { phone: { keep_last: 4 } }
      null: [born]
      filter: "tenant = 7 AND email IS NOT NULL"
"#;

#[test]
fn the_output_shape_drops_hashes_masks_and_nulls_columns() {
    let config = config(FULL);
    let policies = Policies::of(&config).unwrap();
    policies.check(&users()).unwrap();
    let plan = policies.plan(&users()).unwrap();
    let names: Vec<&str> = plan
        .output
        .columns
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["id", "email", "phone", "born", "tenant"]);
    let id = &plan.output.columns[0];
    assert!(id.key, "a hashed key stays the key");
    assert_eq!(id.ty, ColumnType::Utf8);
    assert_eq!(id.field_metadata["sluice.policy"], "hash-hmac-sha256:v1");
    assert_eq!(
        id.field_metadata["sluice.policy_key_id"],
        policies.key_id().unwrap()
    );
    assert_eq!(
        plan.output.columns[2].field_metadata["sluice.policy"],
        "mask:keep_last=4"
    );
    assert_eq!(plan.output.columns[3].ty, ColumnType::Date);
    assert_eq!(
        plan.output.columns[3].field_metadata["sluice.policy"],
        "null"
    );
    let image = plan.image(row(1, "a@example.com", 7));
    assert!(matches!(&image[0], Value::Text(h) if h.len() == 64));
    assert_ne!(image[1], Value::Text("a@example.com".into()));
    assert_eq!(image[2], Value::Text("****0100".into()));
    assert_eq!(image[3], Value::Null);
    assert_eq!(image[4], Value::Int(7));
    assert!(
        !format!("{image:?}").contains("123-45-6789"),
        "the excluded value is gone"
    );
    // The same value always hashes the same (keys stay stable).
    assert_eq!(plan.image(row(1, "b@example.com", 7))[0], image[0]);
    assert_eq!(
        Policies::of(&config)
            .unwrap()
            .plan(&users())
            .unwrap()
            .image(row(1, "x", 7))[0],
        image[0]
    );
}

#[test]
fn a_filtered_update_moves_rows_in_and_out() {
    let config = config(FULL);
    let policies = Policies::of(&config).unwrap();
    let plan = policies.plan(&users()).unwrap();
    let change = |op, before: Option<Vec<Value>>, after: Option<Vec<Value>>| RowChange {
        table: users(),
        op,
        before,
        after,
        before_unlogged: vec![],
        after_unlogged: vec![],
    };
    let ops = |c: Option<RowChange>| c.map(|c| (c.op, c.before.is_some(), c.after.is_some()));
    assert_eq!(
        ops(plan.change(change(Op::Insert, None, Some(row(1, "a", 7))))),
        Some((Op::Insert, false, true))
    );
    assert_eq!(
        ops(plan.change(change(Op::Insert, None, Some(row(1, "a", 8))))),
        None
    );
    let update = |from, to| change(Op::Update, Some(row(1, "a", from)), Some(row(1, "a", to)));
    assert_eq!(
        ops(plan.change(update(7, 7))),
        Some((Op::Update, true, true))
    );
    assert_eq!(
        ops(plan.change(update(8, 7))),
        Some((Op::Insert, false, true)),
        "moved in"
    );
    assert_eq!(
        ops(plan.change(update(7, 8))),
        Some((Op::Delete, true, false)),
        "moved out"
    );
    assert_eq!(ops(plan.change(update(8, 9))), None);
    assert_eq!(
        ops(plan.change(change(Op::Delete, Some(row(1, "a", 8)), None))),
        None
    );
    assert_eq!(
        ops(plan.change(change(Op::Delete, Some(row(1, "a", 7)), None))),
        Some((Op::Delete, true, false))
    );
    let out = plan.change(update(7, 8)).unwrap();
    assert_eq!(
        out.table.columns.len(),
        5,
        "the written change has the output shape"
    );
}

#[test]
fn keys_cannot_be_excluded_masked_or_nulled_and_unknown_columns_are_refused() {
    for (policy, needle) in [
        ("exclude: [id]", "key column id would be excluded"),
        ("include: [email]", "key column id would be excluded"),
        ("null: [id]", "key column id would be nulled"),
        (
            "mask: { id: { value: x } }",
            "key column id would be masked",
        ),
        (
            "exclude: [sn]",
            "names \"sn\", which app.users does not have",
        ),
        (
            "filter: \"tenant = 'x'\"",
            "is not a value of column tenant",
        ),
        ("filter: \"nope = 1\"", "has no column \"nope\""),
    ] {
        let config = config(&format!("  tables:\n    app.users: {{ {policy} }}\n"));
        let e = Policies::of(&config).unwrap().check(&users()).unwrap_err();
        assert_eq!(e.code(), Code::ConfigPolicy, "{policy}");
        assert!(e.to_string().contains(needle), "{policy}: {e}");
    }
}

#[test]
fn the_config_is_checked_before_any_source() {
    for (policy, needle) in [
        ("app.nope: { exclude: [a] }", "not in source.tables"),
        (
            "app.users: { exclude: [a], include: [id] }",
            "include and exclude are both set",
        ),
        (
            "app.users: { exclude: [a], hash: [a] }",
            "in both exclude and hash",
        ),
        (
            "app.users: { mask: { a: { keep_last: 2, value: x } } }",
            "exactly one of keep_last",
        ),
        ("app.users: { filter: \"a = \" }", "ends too early"),
        ("app.users: { filter: \"a = NULL\" }", "IS NULL"),
        (
            "app.users: { include: [id], hash: [email] }",
            "include leaves out",
        ),
    ] {
        let text = format!(
            "job: j\nsource:\n  url: mysql://root@127.0.0.1:3306/app\n  tables: [app.users]\ndestination: {{ type: local, path: o }}\nstate: {{ type: local, path: s }}\npolicy:\n  hash_key: {{ env: X }}\n  tables:\n    {policy}\n"
        );
        let config = crate::config::Config::parse(&text, "t").unwrap();
        let e = check_config(&config).unwrap_err();
        assert!(e.to_string().contains(needle), "{policy}: {e}");
    }
    let text = "job: j\nsource:\n  url: mysql://root@127.0.0.1:3306/app\n  tables: [app.users]\ndestination: { type: local, path: o }\nstate: { type: local, path: s }\npolicy:\n  tables:\n    app.users: { hash: [email] }\n";
    let e = check_config(&crate::config::Config::parse(text, "t").unwrap()).unwrap_err();
    assert!(e.to_string().contains("policy.hash_key is not set"), "{e}");
}

#[test]
fn filters_follow_three_valued_logic_and_exact_comparisons() {
    let schema = users();
    let verdict = |text: &str, image: &[Value]| {
        let expr = filter::parse(text).unwrap();
        filter::compile(&expr, text, &schema)
            .unwrap()
            .verdict(image, &[])
    };
    let mut r = row(1, "a@x", 7);
    assert_eq!(verdict("tenant = 7", &r), Verdict::In);
    assert_eq!(verdict("tenant = 7.0", &r), Verdict::In, "7 = 7.0 exactly");
    assert_eq!(verdict("tenant <> 7", &r), Verdict::Out);
    assert_eq!(verdict("7 < tenant", &r), Verdict::Out);
    assert_eq!(verdict("tenant IN (1, 7)", &r), Verdict::In);
    assert_eq!(verdict("tenant NOT IN (1, 7)", &r), Verdict::Out);
    assert_eq!(
        verdict("email = 'A@X'", &r),
        Verdict::Out,
        "bytes, no collation"
    );
    assert_eq!(verdict("born >= '2022-01-01'", &r), Verdict::In);
    assert_eq!(
        verdict("NOT (tenant = 1 OR email = 'a@x')", &r),
        Verdict::Out
    );
    r[5] = Value::Null;
    assert_eq!(verdict("tenant = 7", &r), Verdict::Out);
    assert_eq!(
        verdict("NOT tenant = 7", &r),
        Verdict::Out,
        "NOT unknown is unknown"
    );
    assert_eq!(verdict("tenant IS NULL", &r), Verdict::In);
    assert_eq!(verdict("tenant = 7 OR id = 1", &r), Verdict::In);
    let expr = filter::parse("tenant = 7").unwrap();
    let compiled = filter::compile(&expr, "tenant = 7", &schema).unwrap();
    assert_eq!(compiled.verdict(&row(1, "a", 7), &[5]), Verdict::Unknown);
}

#[test]
fn filters_render_for_postgres_and_push_only_safe_parts_to_mysql() {
    let schema = users();
    let compiled = |text: &str| {
        let expr = filter::parse(text).unwrap();
        filter::compile(&expr, text, &schema).unwrap()
    };
    let f = compiled("tenant = 7 AND (email = 'o''k' OR born > '2020-01-01') AND NOT email < 'm'");
    assert_eq!(
        f.postgres(),
        "(((\"tenant\" = 7) AND ((\"email\" = 'o''k') OR (\"born\" > '2020-01-01'))) AND (NOT (\"email\" < 'm')))"
    );
    assert_eq!(
        f.pushdown_mysql().unwrap(),
        "(`tenant` = 7) AND ((`email` = 'o''k') OR (`born` > '2020-01-01'))",
        "text order (collation) is not pushed; text equality outside NOT is"
    );
    assert_eq!(compiled("NOT email = 'x'").pushdown_mysql(), None);
    assert_eq!(
        compiled("email IN ('a', 'b') AND tenant NOT IN (1)")
            .pushdown_mysql()
            .unwrap(),
        "(`email` IN ('a', 'b')) AND (`tenant` NOT IN (1))"
    );
}

#[test]
fn the_fingerprint_follows_the_output() {
    let a = config(FULL);
    let policies = Policies::of(&a).unwrap();
    let ra = record::of(&a, &policies, "app.users").unwrap();
    assert!(ra.fingerprint.starts_with("sha256:"));
    assert_eq!(ra.key_id.as_deref(), policies.key_id());
    assert!(record::of(&a, &policies, "app.other").is_none());
    let reordered = config(&FULL.replace("hash: [id, email]", "hash: [email, id]"));
    assert_eq!(
        record::of(&reordered, &Policies::of(&reordered).unwrap(), "app.users")
            .unwrap()
            .fingerprint,
        ra.fingerprint
    );
    for changed in [
        FULL.replace("keep_last: 4", "keep_last: 3"),
        FULL.replace("tenant = 7", "tenant = 8"),
        FULL.replace("exclude: [ssn]", "exclude: []"),
        FULL.replace("keep_last: 4 }", "keep_last: 4, fill: \"#\" }"),
    ] {
        let c = config(&changed);
        let r = record::of(&c, &Policies::of(&c).unwrap(), "app.users").unwrap();
        assert_ne!(r.fingerprint, ra.fingerprint, "{changed}");
    }
    let json = serde_json::to_string(&ra).unwrap();
    assert!(!json.contains("0123456789abcdef"), "no key in the record");
}
