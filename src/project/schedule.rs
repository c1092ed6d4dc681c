//! Runs one task per file of the run, in parallel, each after the tasks of the files it
//! imports: a file's summary is in the fact base before its importers ask about it. Files that
//! import each other (a cycle) cannot all wait: the cycle is cut where a depth-first walk of
//! the imports closes it (the import back to a file still on the walk's path is not waited
//! for), so that all but one file of a cycle still see the summaries they ask about.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Calls `task(i)` for every `i` in `0..dependencies.len()`, on the rayon pool, each after
/// every `task(j)` with `j` in `dependencies[i]` has returned, unless that import closes a
/// cycle.
pub fn in_dependency_order<F>(dependencies: &[Vec<usize>], task: F)
where
    F: Fn(usize) + Sync,
{
    let count = dependencies.len();
    if count == 0 {
        return;
    }
    let finished = finish_order(dependencies);
    // File → the files waiting for it, and how many each still waits for. An import of a file
    // that finished later in the walk is one that closes a cycle.
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); count];
    let mut waiting: Vec<usize> = vec![0; count];
    for (file, needs) in dependencies.iter().enumerate() {
        for &needed in needs {
            if needed < count && finished[needed] < finished[file] {
                dependents[needed].push(file);
                waiting[file] += 1;
            }
        }
    }
    let waiting: Vec<AtomicUsize> = waiting.into_iter().map(AtomicUsize::new).collect();
    let state = State {
        dependents: &dependents,
        waiting: &waiting,
        task: &task,
    };
    rayon::scope(|scope| {
        for (file, waits) in waiting.iter().enumerate() {
            if waits.load(Ordering::Relaxed) == 0 {
                state.start(scope, file);
            }
        }
    });
}

struct State<'s, F> {
    dependents: &'s [Vec<usize>],
    waiting: &'s [AtomicUsize],
    task: &'s F,
}

impl<'s, F: Fn(usize) + Sync> State<'s, F> {
    fn start<'scope>(&'scope self, scope: &rayon::Scope<'scope>, file: usize)
    where
        's: 'scope,
    {
        scope.spawn(move |scope| {
            (self.task)(file);
            for &dependent in &self.dependents[file] {
                if self.waiting[dependent].fetch_sub(1, Ordering::AcqRel) == 1 {
                    self.start(scope, dependent);
                }
            }
        });
    }
}

/// The position of each node in the post-order of a depth-first walk from every node in
/// turn, iteratively (import chains can be deep): an edge to a node that finished earlier is
/// kept by the schedule; one to a node that finished later closes a cycle.
fn finish_order(edges: &[Vec<usize>]) -> Vec<usize> {
    const UNSEEN: usize = usize::MAX;
    let count = edges.len();
    let mut finished = vec![UNSEEN; count];
    let mut seen = vec![false; count];
    let mut next = 0;
    // (node, the position in its edge list to go on from)
    let mut calls: Vec<(usize, usize)> = Vec::new();
    for root in 0..count {
        if seen[root] {
            continue;
        }
        seen[root] = true;
        calls.push((root, 0));
        while let Some(&mut (node, ref mut at)) = calls.last_mut() {
            if let Some(&target) = edges[node].get(*at) {
                *at += 1;
                if target < count && !seen[target] {
                    seen[target] = true;
                    calls.push((target, 0));
                }
                continue;
            }
            calls.pop();
            finished[node] = next;
            next += 1;
        }
    }
    finished
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn a_cycle_is_cut_once_and_chains_are_kept() {
        // 0 → 1 → 2 → 1, 3 → 0: 2 finishes first, so 1 waits for 2 and 2's import of 1
        // closes the cycle.
        let edges = vec![vec![1], vec![2], vec![1], vec![0]];
        let finished = finish_order(&edges);
        assert!(finished[2] < finished[1]);
        assert!(finished[1] < finished[0]);
        assert!(finished[0] < finished[3]);
    }

    #[test]
    fn every_task_runs_after_what_it_imports() {
        // 0 imports 1 and 2; 1 imports 2; 3 and 4 import each other and 0.
        let edges = vec![vec![1, 2], vec![2], vec![], vec![4, 0], vec![3, 0]];
        let order = Mutex::new(Vec::new());
        in_dependency_order(&edges, |file| order.lock().unwrap().push(file));
        let order = order.into_inner().unwrap();
        assert_eq!(order.len(), 5);
        let at = |file| order.iter().position(|&f| f == file).unwrap();
        assert!(at(2) < at(1) && at(1) < at(0));
        assert!(at(0) < at(3) && at(0) < at(4));
    }
}
