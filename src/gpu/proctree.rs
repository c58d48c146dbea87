//! The processes of a command: its pid and every descendant, found from each process's parent
//! pid (the fourth field of `/proc/<pid>/stat` on Linux, proc(5)).

use std::collections::BTreeSet;

/// `root` and every process whose chain of parents leads to it, from `(pid, ppid)` pairs.
pub fn descendants(root: u32, parents: &[(u32, u32)]) -> BTreeSet<u32> {
    let mut tree = BTreeSet::from([root]);
    // a child's pid may be below or above its parent's: repeat until nothing is added
    loop {
        let before = tree.len();
        for &(pid, ppid) in parents {
            if tree.contains(&ppid) {
                tree.insert(pid);
            }
        }
        if tree.len() == before {
            return tree;
        }
    }
}

/// The parent pid in a `/proc/<pid>/stat` line: `pid (comm) state ppid ...`, where `comm` may
/// hold spaces and parentheses, so the fields are counted after the last `)`.
pub fn parent_in_stat(stat: &str) -> Option<u32> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// Every `(pid, ppid)` of `/proc`; empty where there is no `/proc` (not Linux).
pub fn parents() -> Vec<(u32, u32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            Some((pid, parent_in_stat(&stat)?))
        })
        .collect()
}

/// The command's process tree now.
pub fn process_tree(root: u32) -> BTreeSet<u32> {
    descendants(root, &parents())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_grandchildren_whatever_the_pid_order() {
        let parents = [(10, 1), (5, 10), (7, 5), (8, 1), (3, 7)];
        let tree = descendants(10, &parents);
        assert_eq!(tree.into_iter().collect::<Vec<_>>(), vec![3, 5, 7, 10]);
    }

    #[test]
    fn reads_the_parent_past_a_name_with_spaces_and_parentheses() {
        assert_eq!(
            parent_in_stat("4242 (python3 (x) y) S 4200 4242 4200 0 -1"),
            Some(4200)
        );
        assert_eq!(parent_in_stat("garbage"), None);
        assert_eq!(parent_in_stat("1 (init) S"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_in_its_own_tree_and_its_parent_is_not() {
        let me = std::process::id();
        let tree = process_tree(me);
        assert!(tree.contains(&me));
        let parent = parents()
            .into_iter()
            .find(|(p, _)| *p == me)
            .map(|(_, pp)| pp);
        assert!(parent.is_some_and(|pp| !tree.contains(&pp)));
    }
}
