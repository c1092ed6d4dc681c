//! Runs one task per file of the run, in parallel, each after the tasks of the files it
//! imports: a file's summary is in the fact base before its importers ask about it. Files that
//! import each other (a cycle) run without waiting for one another.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Calls `task(i)` for every `i` in `0..dependencies.len()`, on the rayon pool, each after
/// every `task(j)` with `j` in `dependencies[i]` has returned (unless `i` and `j` are on a
/// cycle).
pub fn in_dependency_order<F>(dependencies: &[Vec<usize>], task: F)
where
    F: Fn(usize) + Sync,
{
    let count = dependencies.len();
    if count == 0 {
        return;
    }
    let component = strongly_connected(dependencies);
    let components = component.iter().copied().max().map_or(0, |max| max + 1);
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); components];
    for (file, &c) in component.iter().enumerate() {
        members[c].push(file);
    }
    // Component → the components waiting for it, and how many each still waits for.
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); components];
    let mut waiting: Vec<usize> = vec![0; components];
    for (file, needs) in dependencies.iter().enumerate() {
        let from = component[file];
        for &needed in needs {
            let to = component[needed];
            if to != from && !dependents[to].contains(&from) {
                dependents[to].push(from);
                waiting[from] += 1;
            }
        }
    }
    let waiting: Vec<AtomicUsize> = waiting.into_iter().map(AtomicUsize::new).collect();
    let unfinished: Vec<AtomicUsize> = members.iter().map(|m| AtomicUsize::new(m.len())).collect();
    let state = State {
        members: &members,
        dependents: &dependents,
        waiting: &waiting,
        unfinished: &unfinished,
        task: &task,
    };
    rayon::scope(|scope| {
        for (c, waits) in waiting.iter().enumerate() {
            if waits.load(Ordering::Relaxed) == 0 {
                state.start(scope, c);
            }
        }
    });
}

struct State<'s, F> {
    members: &'s [Vec<usize>],
    dependents: &'s [Vec<usize>],
    waiting: &'s [AtomicUsize],
    unfinished: &'s [AtomicUsize],
    task: &'s F,
}

impl<'s, F: Fn(usize) + Sync> State<'s, F> {
    fn start<'scope>(&'scope self, scope: &rayon::Scope<'scope>, component: usize)
    where
        's: 'scope,
    {
        for &file in &self.members[component] {
            scope.spawn(move |scope| {
                (self.task)(file);
                if self.unfinished[component].fetch_sub(1, Ordering::AcqRel) == 1 {
                    for &dependent in &self.dependents[component] {
                        if self.waiting[dependent].fetch_sub(1, Ordering::AcqRel) == 1 {
                            self.start(scope, dependent);
                        }
                    }
                }
            });
        }
    }
}

/// Tarjan's strongly connected components, iteratively (import chains can be deep): the
/// component of each node.
fn strongly_connected(edges: &[Vec<usize>]) -> Vec<usize> {
    const UNSEEN: usize = usize::MAX;
    let count = edges.len();
    let mut index = vec![UNSEEN; count];
    let mut low = vec![0; count];
    let mut on_stack = vec![false; count];
    let mut stack: Vec<usize> = Vec::new();
    let mut component = vec![UNSEEN; count];
    let mut next_index = 0;
    let mut next_component = 0;
    // (node, the position in its edge list to go on from)
    let mut calls: Vec<(usize, usize)> = Vec::new();
    for root in 0..count {
        if index[root] != UNSEEN {
            continue;
        }
        calls.push((root, 0));
        while let Some(&mut (node, ref mut at)) = calls.last_mut() {
            if *at == 0 && index[node] == UNSEEN {
                index[node] = next_index;
                low[node] = next_index;
                next_index += 1;
                stack.push(node);
                on_stack[node] = true;
            }
            if let Some(&next) = edges[node].get(*at) {
                *at += 1;
                if next >= count {
                    continue;
                }
                if index[next] == UNSEEN {
                    calls.push((next, 0));
                } else if on_stack[next] {
                    low[node] = low[node].min(index[next]);
                }
                continue;
            }
            calls.pop();
            if let Some(&(parent, _)) = calls.last() {
                low[parent] = low[parent].min(low[node]);
            }
            if low[node] == index[node] {
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    component[member] = next_component;
                    if member == node {
                        break;
                    }
                }
                next_component += 1;
            }
        }
    }
    component
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn components_of_a_cycle_and_a_chain() {
        // 0 → 1 → 2 → 1, 3 → 0
        let edges = vec![vec![1], vec![2], vec![1], vec![0]];
        let component = strongly_connected(&edges);
        assert_eq!(component[1], component[2]);
        assert_ne!(component[0], component[1]);
        assert_ne!(component[3], component[0]);
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
