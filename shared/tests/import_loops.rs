//! No import loop among the files of the pool model and the two policies that read it
//! (`shared/src/pools`, `shared/src/capacity`, `shared/src/autoscaler`), the policy kernel
//! (`shared/src/policy`, which imports no policy), the list of the five policies
//! (`shared/src/policies.rs`) and routing (which the kernel once imported back): the graph of
//! which file names which, from the paths their code writes (`use crate::...`,
//! `use super::...`, a module's `use child::...`, and `crate::...` / `super::...` paths in
//! code; not comments), has no cycle. A loop means two files that cannot be read, tested
//! or changed one without the other.
//! (Run natively: it reads the source tree.)
#![cfg(not(target_arch = "wasm32"))]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The directories whose files must not import each other in a loop.
const CHECKED: &[&str] = &[
    "pools",
    "capacity",
    "autoscaler",
    "policy",
    "policies",
    "routing",
];

/// The sources checked: `shared/src`, or the directory `IMPORT_LOOPS_SRC` names (another
/// checkout's `shared/src`, to see the loops it has).
fn src() -> PathBuf {
    match std::env::var_os("IMPORT_LOOPS_SRC") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
    }
}

/// The module path of a source file (`capacity/state.rs` -> `[capacity, state]`,
/// `capacity/mod.rs` -> `[capacity]`).
fn module_of(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src()).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The file of a module path, if it has one.
fn file_of(module: &[String]) -> Option<PathBuf> {
    if module.is_empty() {
        return None;
    }
    let base = src().join(module.join("/"));
    [base.with_extension("rs"), base.join("mod.rs")]
        .into_iter()
        .find(|p| p.is_file())
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without comments (line comments, doc comments, block comments) and
/// without the contents of string and character literals (raw strings too).
fn code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let chars: Vec<char> = text.chars().collect();
    let mut at = 0;
    let mut ident_before = false;
    while at < chars.len() {
        let c = chars[at];
        // Raw strings: r"...", r#"..."#.
        if c == 'r' && !ident_before {
            let hashes = chars[at + 1..].iter().take_while(|c| **c == '#').count();
            if chars.get(at + 1 + hashes) == Some(&'"') {
                let close: Vec<char> = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                let mut i = at + 2 + hashes;
                while i < chars.len() && !chars[i..].starts_with(&close) {
                    i += 1;
                }
                out.push_str("\"\"");
                at = i + close.len();
                ident_before = false;
                continue;
            }
        }
        // Character literals ('"', '\''); lifetimes ('a) are left as they are.
        if c == '\'' {
            let len = if chars.get(at + 1) == Some(&'\\') {
                3
            } else {
                2
            };
            if chars.get(at + len) == Some(&'\'') {
                out.push_str("' '");
                at += len + 1;
                ident_before = false;
                continue;
            }
        }
        ident_before = c.is_alphanumeric() || c == '_';
        at += 1;
        let mut rest = chars[at..].iter().copied().peekable();
        let before = rest.len();
        let chars_ = &mut rest;
        match c {
            '/' if chars_.peek() == Some(&'/') => {
                for c in chars_.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars_.peek() == Some(&'*') => {
                let mut last = ' ';
                for c in chars_.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            '"' => {
                let mut escaped = false;
                for c in chars_.by_ref() {
                    if !escaped && c == '"' {
                        break;
                    }
                    escaped = !escaped && c == '\\';
                }
                out.push_str("\"\"");
            }
            _ => out.push(c),
        }
        at += before - rest.len();
    }
    out
}

/// Every path the code names starting at `crate::`, `super::` or `self::`, as module
/// paths from the crate root (`use a::{b, c}` counts `a`); and in a module with child
/// modules, `use child::...`.
fn named_modules(file: &Path, text: &str) -> BTreeSet<Vec<String>> {
    let own = module_of(file);
    let is_mod =
        file.file_name().is_some_and(|n| n == "mod.rs") || file.with_extension("").is_dir();
    let code = code(text);
    let mut found = BTreeSet::new();
    let bytes = code.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    // Inline modules (`mod tests { ... }`): (brace depth inside, name). Paths in them are
    // relative to them (`super::` there is this file's module).
    let mut inline: Vec<(usize, String)> = Vec::new();
    let mut depth = 0usize;
    let mut pending_mod: Option<String> = None;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' => {
                depth += 1;
                if let Some(name) = pending_mod.take() {
                    inline.push((depth, name));
                }
            }
            b'}' => {
                if inline.last().is_some_and(|(d, _)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            b';' => pending_mod = None,
            _ => {}
        }
        if !ident(bytes[i]) || (i > 0 && (ident(bytes[i - 1]) || bytes[i - 1] == b':')) {
            i += 1;
            continue;
        }
        if code[i..].starts_with("mod ") {
            let name: String = code[i + 4..]
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            pending_mod = Some(name);
            i += 4;
            continue;
        }
        let start = i;
        let mut segments = Vec::new();
        loop {
            let s = i;
            while i < bytes.len() && ident(bytes[i]) {
                i += 1;
            }
            segments.push(code[s..i].to_string());
            if code[i..].starts_with("::")
                && code[i + 2..].starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            {
                i += 2;
            } else {
                break;
            }
        }
        if i == start {
            i += 1;
            continue;
        }
        // The module the code at this point is in: the file's, or an inline one of it.
        let here: Vec<String> = own
            .iter()
            .cloned()
            .chain(inline.iter().map(|(_, n)| n.clone()))
            .collect();
        let mut module: Vec<String> = match segments[0].as_str() {
            "crate" => Vec::new(),
            "super" => {
                // The parent module (a mod.rs is its directory's module).
                let mut m = here.clone();
                m.pop();
                m
            }
            "self" => here.clone(),
            child
                if is_mod
                    && inline.is_empty()
                    && segments.len() > 1
                    && file_of(&[own.clone(), vec![child.to_string()]].concat()).is_some() =>
            {
                let mut m = own.clone();
                m.push(child.to_string());
                found.insert(m);
                continue;
            }
            _ => continue,
        };
        let mut rest = segments[1..].iter().peekable();
        while let Some(s) = rest.peek() {
            if *s == "super" {
                module.pop();
                rest.next();
            } else {
                break;
            }
        }
        // The deepest module the path names.
        let mut deepest = module.clone();
        for s in rest {
            let mut next = deepest.clone();
            next.push(s.clone());
            if file_of(&next).is_some() {
                deepest = next;
            } else {
                break;
            }
        }
        found.insert(deepest);
    }
    found
}

fn checked(module: &[String]) -> bool {
    module
        .first()
        .is_some_and(|m| CHECKED.contains(&m.as_str()))
}

/// The import graph of the checked files: module -> the checked modules it names.
fn graph() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut files = Vec::new();
    for dir in CHECKED {
        let d = src().join(dir);
        rust_files(&d, &mut files);
        files.push(d.with_extension("rs"));
    }
    let mut graph = BTreeMap::new();
    for file in files.into_iter().filter(|f| f.is_file()) {
        let text = std::fs::read_to_string(&file).unwrap();
        let own = module_of(&file);
        let named: BTreeSet<Vec<String>> = named_modules(&file, &text)
            .into_iter()
            .filter(|m| checked(m) && *m != own)
            .collect();
        graph.insert(own, named);
    }
    graph
}

/// A cycle of the graph, if it has one.
fn cycle(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<Vec<Vec<String>>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &Vec<String>,
        graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        marks: &mut BTreeMap<Vec<String>, Mark>,
        stack: &mut Vec<Vec<String>>,
    ) -> Option<Vec<Vec<String>>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let at = stack.iter().position(|n| n == node).unwrap();
                let mut loop_ = stack[at..].to_vec();
                loop_.push(node.clone());
                return Some(loop_);
            }
            None => {}
        }
        marks.insert(node.clone(), Mark::Open);
        stack.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, marks, stack) {
                return Some(c);
            }
        }
        stack.pop();
        marks.insert(node.clone(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in graph.keys() {
        if let Some(c) = visit(node, graph, &mut marks, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

#[test]
fn the_pool_model_and_its_policies_import_no_file_in_a_loop() {
    let graph = graph();
    assert!(
        graph.len() > 20,
        "the files of {CHECKED:?} were not found: {:?}",
        graph.keys()
    );
    if let Some(c) = cycle(&graph) {
        let names: Vec<String> = c.iter().map(|m| m.join("/")).collect();
        panic!("import loop: {}", names.join(" -> "));
    }
}

/// The checker finds the loops it is for: in a graph made by hand, and in the paths a file
/// writes (`use super::x`, a module's `use child::y`, `crate::a::b::f()` in code).
#[test]
fn the_checker_sees_loops_and_paths() {
    let m = |s: &str| s.split('/').map(str::to_string).collect::<Vec<_>>();
    let mut g = BTreeMap::new();
    g.insert(m("a/x"), BTreeSet::from([m("a/y")]));
    g.insert(m("a/y"), BTreeSet::from([m("a/z")]));
    g.insert(m("a/z"), BTreeSet::new());
    assert_eq!(cycle(&g), None);
    g.insert(m("a/z"), BTreeSet::from([m("a/x")]));
    assert_eq!(
        cycle(&g),
        Some(vec![m("a/x"), m("a/y"), m("a/z"), m("a/x")])
    );
    let state = src().join("capacity/state.rs");
    let named = named_modules(
        &state,
        "// use crate::autoscaler::ceiling;\nuse super::decision::X;\nfn f() { crate::pools::read::read_offer(); let s = \"crate::routing\"; }",
    );
    assert_eq!(
        named,
        BTreeSet::from([m("capacity/decision"), m("pools/read")])
    );
    let module = src().join("capacity/mod.rs");
    let named = named_modules(&module, "use state::PoolError;\nuse serde_json::Value;");
    assert_eq!(named, BTreeSet::from([m("capacity/state")]));
}
