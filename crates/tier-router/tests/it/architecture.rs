//! The module structure of tier-router: no import loop. Each module
//! names the modules it uses through `crate::<module>` paths; the graph they form must be
//! acyclic, so that every module can be read knowing only the ones below it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// `module -> modules it uses`, from `crate::<module>` paths outside comments and test
/// modules.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut sources = BTreeMap::new();
    for entry in std::fs::read_dir(&src).expect("src") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "rs") {
            let name = path.file_stem().expect("stem").to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).expect("source");
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default().to_owned();
            sources.insert(name, code);
        }
    }
    let modules: BTreeSet<String> = sources.keys().filter(|m| *m != "lib").cloned().collect();
    let mut graph = BTreeMap::new();
    for (name, code) in &sources {
        let mut uses = BTreeSet::new();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (at, _) in line.match_indices("crate::") {
                let rest = &line[at + "crate::".len()..];
                let ident: String =
                    rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if modules.contains(&ident) && ident != *name {
                    uses.insert(ident);
                }
            }
        }
        graph.insert(name.clone(), uses);
    }
    graph
}

/// A cycle through `graph`, if any (depth-first search).
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
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
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn tier_router_has_no_import_loop() {
    let graph = module_graph();
    assert!(graph.len() > 10, "the modules were found: {graph:?}");
    assert!(graph["store"].contains("writer"), "the graph is read: {graph:?}");
    if let Some(cycle) = find_cycle(&graph) {
        panic!("an import loop: {}\n{graph:#?}", cycle.join(" -> "));
    }
}

#[test]
fn the_cycle_finder_finds_a_loop() {
    let graph: BTreeMap<String, BTreeSet<String>> = [("a", vec!["b"]), ("b", vec!["c"]), ("c", vec!["a"])]
        .into_iter()
        .map(|(n, d)| (n.to_owned(), d.into_iter().map(str::to_owned).collect()))
        .collect();
    assert_eq!(find_cycle(&graph), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
}
