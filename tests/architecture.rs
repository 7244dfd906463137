//! The import direction of `src/`, checked from the source text: the rooms (top-level
//! modules) form no cycle, only the job room and the faces reach the drain, `config`
//! names nothing but core types, and one place writes checkpoints.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Rooms allowed to import `drain`: the job room and the faces.
const DRAIN_CALLERS: &[&str] = &["job", "cli", "lambda"];
/// What `config` may import: core types with no I/O.
const CONFIG_MAY_IMPORT: &[&str] = &["error", "redact", "arn"];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The room a file belongs to: its first path component under `src/`, without `.rs`
/// (`None` for the crate roots).
fn room_of(relative: &Path) -> Option<String> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    let room = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(room, "lib" | "main")).then(|| room.to_owned())
}

/// Every `crate::<room>` named in code (comments and doc comments excluded).
fn rooms_named(text: &str) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                named.insert(name);
            }
        }
    }
    named
}

/// room → rooms it names, and (room, named) → the files that name it.
type Graph = BTreeMap<String, BTreeSet<String>>;

fn import_graph() -> (Graph, BTreeMap<(String, String), BTreeSet<String>>) {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph = Graph::new();
    let mut witnesses = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(&src).expect("under src").to_path_buf();
        let Some(room) = room_of(&relative) else {
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("a readable source file");
        let entry = graph.entry(room.clone()).or_default();
        for named in rooms_named(&text) {
            if named != room {
                entry.insert(named.clone());
                witnesses
                    .entry((room.clone(), named))
                    .or_insert_with(BTreeSet::new)
                    .insert(relative.display().to_string());
            }
        }
    }
    (graph, witnesses)
}

/// A cycle of the graph as a path `a → b → … → a`, if there is one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, done, path) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut done, &mut Vec::new()))
}

#[test]
fn the_rooms_form_no_import_cycle() {
    let (graph, witnesses) = import_graph();
    assert!(
        graph.len() > 20,
        "found only {} rooms under src/",
        graph.len()
    );
    if let Some(cycle) = find_cycle(&graph) {
        let steps: Vec<String> = cycle
            .windows(2)
            .map(|w| {
                let files = &witnesses[&(w[0].clone(), w[1].clone())];
                format!("{} → {} (in {files:?})", w[0], w[1])
            })
            .collect();
        panic!("import cycle among src/ rooms:\n  {}", steps.join("\n  "));
    }
}

#[test]
fn only_the_job_room_and_the_faces_reach_the_drain() {
    let (graph, witnesses) = import_graph();
    for (room, named) in &graph {
        if named.contains("drain") && !DRAIN_CALLERS.contains(&room.as_str()) {
            panic!(
                "{room} imports drain (in {:?}); only {DRAIN_CALLERS:?} may",
                witnesses[&(room.clone(), "drain".to_owned())]
            );
        }
    }
}

#[test]
fn config_names_only_core_types() {
    let (graph, _) = import_graph();
    let named = &graph["config"];
    let above: Vec<&String> = named
        .iter()
        .filter(|n| !CONFIG_MAY_IMPORT.contains(&n.as_str()))
        .collect();
    assert!(
        above.is_empty(),
        "config imports {above:?}; it may import only {CONFIG_MAY_IMPORT:?}"
    );
}

#[test]
fn one_place_writes_checkpoints() {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut callers = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a readable source file");
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or_default();
            if code.contains(".advance_checkpoint(") {
                callers.push(
                    file.strip_prefix(&src)
                        .expect("under src")
                        .display()
                        .to_string(),
                );
            }
        }
    }
    assert_eq!(
        callers,
        ["commit.rs"],
        "checkpoint writes outside the committer"
    );
}

#[test]
fn the_checker_sees_a_cycle_and_comments_are_not_imports() {
    let mut graph = Graph::new();
    graph.insert("a".into(), ["b".into()].into());
    graph.insert("b".into(), ["c".into()].into());
    graph.insert("c".into(), ["a".into()].into());
    assert_eq!(
        find_cycle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    graph.insert("c".into(), BTreeSet::new());
    assert_eq!(find_cycle(&graph), None);
    let named =
        rooms_named("use crate::x::Y; // crate::z\n//! see [`crate::w`]\nlet v = crate::q::f();");
    assert_eq!(named, ["q".to_owned(), "x".to_owned()].into());
}
