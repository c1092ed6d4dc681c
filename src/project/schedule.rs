//! Runs one task per file of the run, in parallel, each after the tasks of the files it
//! imports: a file's summary is in the fact base before its importers ask about it. Files that
//! import each other (a cycle) cannot all wait. Python code breaks its own cycles with
//! deferred imports (in a function, under `if TYPE_CHECKING:`), so those are not waited for
//! where they close a cycle: within a set of files that all reach each other, only imports at
//! module level order the files. A cycle of those is cut where a depth-first walk of them
//! closes it (the import back to a file still on the walk's path is not waited for), so that
//! all but one file of the cycle still see the summaries they ask about. A file that did not
//! wait for some import is checked again as soon as those files are done, while the rest of
//! the run goes on. The walk starts from the costliest files, so a cycle is cut at the import
//! of its costliest file: that file waits for the others, and the one checked again is cheaper.
//!
//! Of the jobs ready to run, the one heading the costliest chain of files waiting on it runs
//! first: a file that hundreds import (a package's base model) would otherwise hold them all
//! back while cores idle, and the costliest files would be left for the end, when nothing is
//! left to run beside them.

use std::collections::BinaryHeap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::{DfsPostOrder, EdgeFiltered, EdgeRef};

/// A file that a file imports: its index, and whether every import of it is deferred.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needed {
    pub file: usize,
    pub deferred: bool,
}

/// Calls `task(i)` for every `i` in `0..dependencies.len()`, on the rayon pool, each after
/// every `task(j)` with `j` among `dependencies[i]` has returned, unless that import closes a
/// cycle; then `recheck(i)` once `task(i)` and the tasks of the imports it did not wait for
/// have returned (only for files with such imports). `costs[i]` is what `task(i)` is expected
/// to cost (the file's size); missing costs count as 0.
pub fn in_dependency_order<F, R>(dependencies: &[Vec<Needed>], costs: &[usize], task: F, recheck: R)
where
    F: Fn(usize) + Sync,
    R: Fn(usize) + Sync,
{
    let count = dependencies.len();
    if count == 0 {
        return;
    }
    let cost = |file: usize| costs.get(file).copied().unwrap_or(0);
    let finished = finish_order(dependencies, &cost);
    // File → the files waiting for it, and how many each still waits for. An import of a file
    // that finished later in the walk is one that closes a cycle: the importer is checked
    // again once both are done.
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); count];
    let mut waiting: Vec<usize> = vec![0; count];
    let mut rechecks: Vec<Vec<usize>> = vec![Vec::new(); count];
    let mut unchecked: Vec<usize> = vec![0; count];
    for (file, needs) in dependencies.iter().enumerate() {
        for &Needed { file: needed, .. } in needs {
            if needed >= count || needed == file {
                continue;
            }
            if finished[needed] < finished[file] {
                dependents[needed].push(file);
                waiting[file] += 1;
            } else {
                rechecks[needed].push(file);
                unchecked[file] += 1;
            }
        }
        if unchecked[file] > 0 {
            // Its own task too.
            rechecks[file].push(file);
            unchecked[file] += 1;
        }
    }
    let urgency = chain_costs(&dependents, &finished, &cost);
    let state = State {
        dependents: &dependents,
        waiting: &waiting
            .into_iter()
            .map(AtomicUsize::new)
            .collect::<Vec<_>>(),
        rechecks: &rechecks,
        unchecked: &unchecked
            .into_iter()
            .map(AtomicUsize::new)
            .collect::<Vec<_>>(),
        urgency: &urgency,
        costs,
        ready: Mutex::new(BinaryHeap::new()),
        task: &task,
        recheck: &recheck,
    };
    rayon::scope(|scope| {
        for (file, waits) in state.waiting.iter().enumerate() {
            if waits.load(Ordering::Relaxed) == 0 {
                state.queue(scope, Job::Task(file), state.urgency[file]);
            }
        }
    });
}

/// What a queued job does; a task before a recheck of the same urgency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Job {
    Recheck(usize),
    Task(usize),
}

struct State<'s, F, R> {
    dependents: &'s [Vec<usize>],
    waiting: &'s [AtomicUsize],
    /// File → the files to check again once it is done (itself among them), and how many
    /// files each still waits for before that.
    rechecks: &'s [Vec<usize>],
    unchecked: &'s [AtomicUsize],
    urgency: &'s [usize],
    /// As given: a file past its end costs 0.
    costs: &'s [usize],
    /// The jobs whose files are ready, most urgent first.
    ready: Mutex<BinaryHeap<(usize, Job)>>,
    task: &'s F,
    recheck: &'s R,
}

impl<'s, F: Fn(usize) + Sync, R: Fn(usize) + Sync> State<'s, F, R> {
    /// Queues a job and spawns a rayon job for it. That runs the most urgent queued job when a
    /// thread takes it up, which is not always this one: rayon jobs and queued jobs stay one
    /// to one, so every job runs once.
    fn queue<'scope>(&'scope self, scope: &rayon::Scope<'scope>, job: Job, urgency: usize)
    where
        's: 'scope,
    {
        self.lock().push((urgency, job));
        scope.spawn(move |scope| {
            let (_, job) = self
                .lock()
                .pop()
                .expect("a rayon job is spawned for each queued job");
            match job {
                Job::Task(file) => {
                    (self.task)(file);
                    for &dependent in &self.dependents[file] {
                        if self.waiting[dependent].fetch_sub(1, Ordering::AcqRel) == 1 {
                            self.queue(scope, Job::Task(dependent), self.urgency[dependent]);
                        }
                    }
                    for &importer in &self.rechecks[file] {
                        if self.unchecked[importer].fetch_sub(1, Ordering::AcqRel) == 1 {
                            // Nothing waits on a recheck: only its own cost makes it urgent.
                            let own = self.costs.get(importer).copied().unwrap_or(0);
                            self.queue(scope, Job::Recheck(importer), own);
                        }
                    }
                }
                Job::Recheck(file) => (self.recheck)(file),
            }
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BinaryHeap<(usize, Job)>> {
        self.ready
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Each file's position in an order in which it comes after the files it waits for. Sets of
/// files that reach each other (strongly connected) come after the sets they import, as
/// petgraph's Kosaraju lists them (iterative, unlike its Tarjan: import chains can be as long
/// as a run has files); within a set, in the post-order of a depth-first walk of its
/// module-level imports from every file in turn, costliest first: an import of a file placed
/// earlier is waited for, one of a file placed later closes a cycle.
fn finish_order(dependencies: &[Vec<Needed>], cost: &impl Fn(usize) -> usize) -> Vec<usize> {
    let count = dependencies.len();
    let mut graph: DiGraph<(), bool, usize> = DiGraph::with_capacity(count, 0);
    for _ in 0..count {
        graph.add_node(());
    }
    for (file, needs) in dependencies.iter().enumerate() {
        // petgraph lists a node's edges last added first: added in reverse, the walk follows a
        // file's imports in the order of the targets, which cuts fewer of them that matter on
        // real packages (ignite: 7 files linted again, in that order 2).
        for needed in needs.iter().rev().filter(|needed| needed.file < count) {
            graph.add_edge(
                NodeIndex::new(file),
                NodeIndex::new(needed.file),
                needed.deferred,
            );
        }
    }
    let sets = petgraph::algo::kosaraju_scc(&graph);
    let mut set_of = vec![0; count];
    for (set, files) in sets.iter().enumerate() {
        for file in files {
            set_of[file.index()] = set;
        }
    }
    let walked = EdgeFiltered::from_fn(&graph, |edge| {
        !*edge.weight() && set_of[edge.source().index()] == set_of[edge.target().index()]
    });
    let mut finished = vec![0; count];
    let mut next = 0;
    let mut walk = DfsPostOrder::empty(&walked);
    for mut files in sets {
        // Stable: equal costs keep the order of the targets.
        files.sort_by_key(|file| (std::cmp::Reverse(cost(file.index())), file.index()));
        for root in files {
            if walk.discovered.contains(root.index()) {
                continue;
            }
            walk.move_to(root);
            while let Some(file) = walk.next(&walked) {
                finished[file.index()] = next;
                next += 1;
            }
        }
    }
    finished
}

/// Each node's cost plus the costliest chain of nodes waiting on it. A dependent finished
/// later in the walk than what it waits for, so going down the finish order meets every
/// dependent before the nodes it waits on.
fn chain_costs(
    dependents: &[Vec<usize>],
    finished: &[usize],
    cost: &impl Fn(usize) -> usize,
) -> Vec<usize> {
    let mut by_finish: Vec<usize> = (0..dependents.len()).collect();
    by_finish.sort_unstable_by_key(|&node| std::cmp::Reverse(finished[node]));
    let mut chain = vec![0; dependents.len()];
    for node in by_finish {
        let longest = dependents[node]
            .iter()
            .map(|&dependent| chain[dependent])
            .max()
            .unwrap_or(0);
        chain[node] = cost(node).saturating_add(longest);
    }
    chain
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_cost(_: usize) -> usize {
        0
    }

    /// Module-level imports, by file.
    fn needed(edges: &[&[usize]]) -> Vec<Vec<Needed>> {
        edges
            .iter()
            .map(|needs| {
                needs
                    .iter()
                    .map(|&file| Needed {
                        file,
                        deferred: false,
                    })
                    .collect()
            })
            .collect()
    }

    /// Runs the schedule on a pool of `threads`: the jobs in the order they ran.
    fn run(edges: &[Vec<Needed>], costs: &[usize], threads: usize) -> Vec<Job> {
        let log = Mutex::new(Vec::new());
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| {
                in_dependency_order(
                    edges,
                    costs,
                    |file| log.lock().unwrap().push(Job::Task(file)),
                    |file| log.lock().unwrap().push(Job::Recheck(file)),
                )
            });
        log.into_inner().unwrap()
    }

    fn tasks(jobs: &[Job]) -> Vec<usize> {
        jobs.iter()
            .filter_map(|job| match job {
                Job::Task(file) => Some(*file),
                Job::Recheck(_) => None,
            })
            .collect()
    }

    #[test]
    fn a_chain_as_long_as_a_big_run_does_not_overflow_the_stack() {
        // Each file imports the next; on a test thread's small stack, a recursive walk would
        // overflow long before the end.
        let count = 300_000;
        let edges: Vec<Vec<Needed>> = (0..count)
            .map(|file| {
                (file + 1 < count)
                    .then_some(Needed {
                        file: file + 1,
                        deferred: false,
                    })
                    .into_iter()
                    .collect()
            })
            .collect();
        let finished = finish_order(&edges, &no_cost);
        assert!((1..count).all(|file| finished[file] < finished[file - 1]));
    }

    #[test]
    fn a_cycle_is_cut_once_and_chains_are_kept() {
        // 0 → 1 → 2 → 1, 3 → 0: 2 finishes first, so 1 waits for 2 and 2's import of 1
        // closes the cycle.
        let edges = needed(&[&[1], &[2], &[1], &[0]]);
        let finished = finish_order(&edges, &no_cost);
        assert!(finished[2] < finished[1]);
        assert!(finished[1] < finished[0]);
        assert!(finished[0] < finished[3]);
    }

    #[test]
    fn a_cycle_is_cut_at_the_import_of_its_costliest_file() {
        // 0 ⇄ 1, and 1 is the costlier: the walk starts there, so 0 runs first, 1 waits for
        // it, and 0 (which did not wait for 1) is checked again once 1 is done.
        let edges = needed(&[&[1], &[0]]);
        let jobs = run(&edges, &[10, 500], 1);
        assert_eq!(jobs, vec![Job::Task(0), Job::Task(1), Job::Recheck(0)]);
    }

    #[test]
    fn a_cycle_is_cut_at_its_deferred_import() {
        // As above, but 1 imports 0 in a function: 1 goes first, whatever it costs, and is
        // checked again; 0 waits for it. An unrelated deferred import (2 of 0) is waited for.
        let mut edges = needed(&[&[1], &[], &[]]);
        edges[1].push(Needed {
            file: 0,
            deferred: true,
        });
        edges[2].push(Needed {
            file: 0,
            deferred: true,
        });
        let jobs = run(&edges, &[10, 500, 1], 1);
        let at = |job| jobs.iter().position(|&j| j == job).unwrap();
        assert!(at(Job::Task(1)) < at(Job::Task(0)));
        assert!(at(Job::Task(0)) < at(Job::Task(2)));
        assert!(at(Job::Task(0)) < at(Job::Recheck(1)));
        assert!(!jobs.contains(&Job::Recheck(0)) && !jobs.contains(&Job::Recheck(2)));
    }

    #[test]
    fn every_task_runs_after_what_it_imports() {
        // 0 imports 1 and 2; 1 imports 2; 3 and 4 import each other and 0.
        let edges = needed(&[&[1, 2], &[2], &[], &[4, 0], &[3, 0]]);
        for threads in [1, 4] {
            let jobs = run(&edges, &[], threads);
            let order = tasks(&jobs);
            assert_eq!(order.len(), 5);
            let at = |job| jobs.iter().position(|&j| j == job).unwrap();
            let task = |file| at(Job::Task(file));
            assert!(task(2) < task(1) && task(1) < task(0));
            assert!(task(0) < task(3) && task(0) < task(4));
            // One of 3 and 4 went first without the other: it alone is checked again, after
            // both.
            let rechecked: Vec<usize> = jobs
                .iter()
                .filter_map(|job| match job {
                    Job::Recheck(file) => Some(*file),
                    Job::Task(_) => None,
                })
                .collect();
            assert_eq!(rechecked.len(), 1, "{jobs:?}");
            let first = rechecked[0];
            assert!(first == 3 || first == 4);
            assert!(at(Job::Recheck(first)) > task(3).max(task(4)));
        }
    }

    #[test]
    fn the_head_of_the_costliest_chain_runs_first() {
        // 0, 1 and 2 are ready; 3 and 4 wait on 2. On one thread, 2 goes first even though it
        // is the cheapest itself: the chain behind it is the costliest.
        let edges = needed(&[&[], &[], &[], &[2], &[2]]);
        let jobs = run(&edges, &[50, 60, 10, 100, 5], 1);
        assert_eq!(tasks(&jobs), vec![2, 3, 1, 0, 4]);
    }
}
